"""A plan.json from elsewhere is refused in one line, never with an internal error (issue 36,
L8): the Action's publish job reads the plan from an artifact the unprivileged job wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main
from tests.test_verify_local import synthetic_plan


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"issue_number": 10**30}, "`issue_number` holds 100000000000000000000000, which is not"),
        ({"issue_number": -3}, "`issue_number` holds -3, which is not an issue number"),
        ({"members": [{}]}, "members[0] lacks `class_name`, `recipe`, `fingerprint`"),
        (
            {
                "members": [
                    {
                        "class_name": "A",
                        "recipe": "r",
                        "fingerprint": "f",
                        "issues": [2**40],
                        "finding": None,
                    }
                ]
            },
            "`issues` holds 1099511627776",
        ),
    ],
)
@pytest.mark.parametrize("command", [["verify", "--gpu", "skip", "--no-engine"], ["publish"]])
def test_a_malformed_plan_is_refused_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, object],
    said: str,
    command: list[str],
) -> None:
    plan_dir = synthetic_plan(tmp_path)
    data = json.loads((plan_dir / "plan.json").read_text())
    for member in change.get("members", []):
        if "finding" in member:  # a member otherwise well formed: the plan's own finding
            member["finding"] = data["finding"]
    (plan_dir / "plan.json").write_text(json.dumps({**data, **change}))
    capsys.readouterr()

    code = main([command[0], str(plan_dir), *command[1:]])

    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and said in err and "internal error" not in err
