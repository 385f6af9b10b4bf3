"""`bot drafts`: list, refresh and accept the catalogue of public draft models."""

from __future__ import annotations

import argparse


def cmd_drafts(args: argparse.Namespace) -> int:
    from bot import drafts

    if args.drafts_command == "refresh":
        found = drafts.refresh_from_hub(endpoint=args.endpoint)
        print(f"found {len(found)} draft models; catalogue: {drafts.user_catalogue_path()}")
        print("refreshed entries are unreviewed until `bot drafts accept REPO_ID`")
        return 0
    if args.drafts_command == "accept":
        for e in drafts.accept_draft(args.repo_id):
            shown = drafts.shown(e.repo_id, e.target_repo_id or "-", e.target_arch or "-")
            print("accepted {} -> {} ({})".format(*shown))
        return 0
    catalogue = drafts.load_catalogue()
    entries = catalogue.for_arch(args.arch) if args.arch else list(catalogue.entries)
    for e in entries:
        print(drafts.listing_line(e))
    return 0


def add_drafts(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("drafts", help="list or refresh the catalogue of public draft models")
    actions = p.add_subparsers(dest="drafts_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="print method, draft, target and architecture")
    listing.add_argument("--arch", help="only drafts for this target architecture")
    refresh = actions.add_parser("refresh", help="find draft models on the Hugging Face Hub")
    refresh.add_argument("--endpoint", help="Hub URL (default: $HF_ENDPOINT or huggingface.co)")
    accept = actions.add_parser("accept", help="mark a refreshed draft reviewed (maintainer)")
    accept.add_argument("repo_id", help="the draft's Hub id, as `drafts list` shows it")
    p.set_defaults(handler=cmd_drafts)
