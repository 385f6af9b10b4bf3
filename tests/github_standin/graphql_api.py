"""The stand-in's GraphQL queries, executed by graphql-core against a slice of GitHub's schema.

Only the types and fields the bot asks for are declared, with GitHub's names, nullability and
descriptions, so a query that names a field GitHub does not have fails here as it would there
(``{"errors": [...]}`` with HTTP 200). Answers are shaped as GitHub answers: ``{"data": ...}``.

Issue body edits follow what GitHub does: nothing until the first edit; from then on one
``UserContentEdit`` per revision (the original included), newest first, whose ``diff`` holds
the whole body at that revision.
"""

from __future__ import annotations

from typing import Any

from graphql import build_schema, graphql_sync

from .state import State

_SCHEMA = build_schema(
    """
    "An object that can have users assigned to it."
    interface Actor {
      "The username of the actor."
      login: String!
    }

    type User implements Actor {
      login: String!
    }

    "An edit on user content"
    type UserContentEdit {
      id: ID!
      "Identifies the date and time when the object was created."
      createdAt: String!
      "Identifies the date and time when the object was deleted."
      deletedAt: String
      "A summary of the changes for this edit"
      diff: String
      "When this content was edited"
      editedAt: String!
      "The actor who edited this content"
      editor: Actor
      "Identifies the date and time when the object was last updated."
      updatedAt: String!
    }

    "A list of edits to content."
    type UserContentEditConnection {
      nodes: [UserContentEdit]
      totalCount: Int!
    }

    type Issue {
      id: ID!
      number: Int!
      title: String!
      body: String!
      lastEditedAt: String
      "A list of edits to this content."
      userContentEdits(
        after: String, before: String, first: Int, last: Int
      ): UserContentEditConnection
    }

    type Repository {
      nameWithOwner: String!
      issue(number: Int!): Issue
    }

    type Query {
      repository(owner: String!, name: String!, followRenames: Boolean = true): Repository
    }
    """
)


def _actor_type(value: Any, info: Any, abstract_type: Any) -> str:
    return "User"


_SCHEMA.get_type("Actor").resolve_type = _actor_type  # type: ignore[union-attr]


class _Root:
    def __init__(self, state: State) -> None:
        self.state = state

    def repository(self, info: Any, owner: str, name: str, followRenames: bool = True) -> Any:  # noqa: N803
        full_name = f"{owner}/{name}"
        if full_name not in self.state.repos:
            return None
        return _Repository(self.state, full_name)


class _Repository:
    def __init__(self, state: State, full_name: str) -> None:
        self.state = state
        self.nameWithOwner = full_name

    def issue(self, info: Any, number: int) -> Any:
        item = self.state.issues.get((self.nameWithOwner, number))
        if item is None or item.get("pull"):
            return None
        return _Issue(item, number)


class _Issue:
    def __init__(self, item: dict[str, Any], number: int) -> None:
        self.item = item
        self.id = f"I_{item['id']}"
        self.number = number
        self.title = item["title"]
        self.body = item["body"] or ""
        edits = item.get("edits") or []
        self.lastEditedAt = edits[-1]["edited_at"] if edits else None

    def userContentEdits(  # noqa: N802 - GitHub's field name
        self,
        info: Any,
        first: int | None = None,
        last: int | None = None,
        after: str | None = None,
        before: str | None = None,
    ) -> dict[str, Any]:
        newest_first = list(reversed(self.item.get("edits") or []))
        nodes = [
            {
                "id": f"UCE_{self.item['id']}_{n}",
                "createdAt": edit["edited_at"],
                "updatedAt": edit["edited_at"],
                "editedAt": edit["edited_at"],
                "deletedAt": None,
                "diff": edit["body"],
                "editor": {"login": edit["editor"]} if edit["editor"] else None,
            }
            for n, edit in enumerate(newest_first)
        ]
        if first is not None:
            nodes = nodes[:first]
        if last is not None:
            nodes = nodes[-last:] if last else []
        return {"nodes": nodes, "totalCount": len(newest_first)}


def record_body_edit(item: dict[str, Any], editor: str, new_body: str | None, at: str) -> None:
    """Keep the issue's body history as GitHub does (call before replacing the body)."""
    if new_body == item.get("body"):
        return
    edits = item.setdefault("edits", [])
    if not edits:
        edits.append(
            {"editor": item["user"], "edited_at": item["created_at"], "body": item["body"]}
        )
    edits.append({"editor": editor, "edited_at": at, "body": new_body})


def execute(state: State, query: str, variables: dict[str, Any] | None) -> dict[str, Any]:
    result = graphql_sync(_SCHEMA, query, root_value=_Root(state), variable_values=variables)
    answer: dict[str, Any] = {}
    if result.errors:
        answer["errors"] = [
            {"message": error.message, **({"path": error.path} if error.path else {})}
            for error in result.errors
        ]
    if result.data is not None or not result.errors:
        answer["data"] = result.data
    return answer
