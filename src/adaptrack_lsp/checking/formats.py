"""How `adaptrack-lsp check` writes its findings: ``text`` (``path:line:col: message``,
as ruff), ``json`` (a list of objects), ``github`` (workflow annotations) and ``sarif``
(2.1.0, for code scanning).

Every format writes the same records (`record`): the file, the 1-based range in
characters, the name as written, the message, the kind, the versions lacking the name
and, with ``--suggest``, the replacements offered.  `Report` collects them: text and
GitHub annotations are written as each file is checked, JSON and SARIF once at the end.
"""

from __future__ import annotations

import json
from typing import TextIO

from adaptrack_lsp import __version__

FORMATS = ("text", "json", "github", "sarif")
#: SARIF rule ids per finding kind, with their short descriptions
RULES = {
    "import": ("missing-module", "A module or imported name that does not exist in the environment or in a version target"),
    "attribute": ("missing-attribute", "An attribute of a module that does not exist in the environment or in a version target"),
    "receiver": ("missing-member", "A member of a typed object that does not exist in the environment or in a version target"),
    "keyword": ("unknown-keyword", "A keyword argument the callee does not take in the environment or in a version target"),
    "deprecated": ("deprecated", "An API that announces its deprecation"),
}


def record(path: str, finding, suggestions: list[dict] | None = None) -> dict:
    """The JSON object of one finding."""
    item = {
        "path": path,
        "line": finding.line,
        "column": finding.column,
        "end_line": finding.end_line,
        "end_column": finding.end_column,
        "kind": finding.kind,
        "name": finding.name,
        "message": finding.message,
        "targets": list(finding.targets),
    }
    if suggestions is not None:
        item["suggestions"] = suggestions
    return item


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def text_line(item: dict) -> str:
    line = f"{item['path']}:{item['line']}:{item['column']}: {item['message']}"
    if item["kind"] == "deprecated":
        line = f"{item['path']}:{item['line']}:{item['column']}: (deprecated) {item['message']}"
    for suggestion in item.get("suggestions") or ():
        line += f"\n    fix: {suggestion['text']}"
    return line


def github_line(item: dict) -> str:
    level = "notice" if item["kind"] == "deprecated" else "error"
    properties = ",".join(
        [
            f"file={_escape_property(item['path'])}",
            f"line={item['line']}",
            f"col={item['column']}",
            f"endLine={item['end_line']}",
            f"endColumn={item['end_column']}",
            f"title={_escape_property('adaptrack ' + RULES[item['kind']][0])}",
        ]
    )
    message = item["message"]
    if item.get("suggestions"):
        message += "\nfix: " + "\nfix: ".join(s["text"] for s in item["suggestions"])
    return f"::{level} {properties}::{_escape_data(message)}"


def sarif(items: list[dict], notes: list[tuple[str, str]]) -> dict:
    """A SARIF 2.1.0 log of `items`; `notes`: (path, text) of what was not checked."""
    rules = [{"id": rule, "name": rule, "shortDescription": {"text": text}} for rule, text in RULES.values()]
    index_of = {kind: position for position, kind in enumerate(RULES)}
    results = []
    for item in items:
        rule = RULES[item["kind"]][0]
        result = {
            "ruleId": rule,
            "ruleIndex": index_of[item["kind"]],
            "level": "note" if item["kind"] == "deprecated" else "error",
            "message": {"text": item["message"]},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": item["path"].replace("\\", "/")},
                        "region": {
                            "startLine": item["line"],
                            "startColumn": item["column"],
                            "endLine": item["end_line"],
                            "endColumn": item["end_column"],
                        },
                    }
                }
            ],
            "properties": {"name": item["name"], "targets": item["targets"]},
        }
        if item.get("suggestions"):
            result["fixes"] = [
                {
                    "description": {"text": f"rewrite as {s['text']}"},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": item["path"].replace("\\", "/")},
                            "replacements": [
                                {
                                    "deletedRegion": {
                                        "startLine": s["start"]["line"],
                                        "startColumn": s["start"]["column"],
                                        "endLine": s["end"]["line"],
                                        "endColumn": s["end"]["column"],
                                    },
                                    "insertedContent": {"text": s["text"]},
                                }
                            ],
                        }
                    ],
                }
                for s in item["suggestions"]
            ]
        results.append(result)
    notifications = [
        {"level": "warning", "message": {"text": text}, "locations": [{"physicalLocation": {"artifactLocation": {"uri": path.replace("\\", "/")}}}]}
        for path, text in notes
    ]
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "adaptrack-lsp", "version": __version__, "rules": rules}},
                "columnKind": "unicodeCodePoints",
                "results": results,
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
            }
        ],
    }


class Report:
    """Writes findings in one format to `out` (text and GitHub annotations as they come)."""

    def __init__(self, form: str, out: TextIO):
        if form not in FORMATS:
            raise ValueError(f"unknown format {form!r} (known: {', '.join(FORMATS)})")
        self.form = form
        self.out = out
        self.items: list[dict] = []
        self.notes: list[tuple[str, str]] = []
        self.files_with_findings = 0

    def add(self, items: list[dict]) -> None:
        if items:
            self.files_with_findings += 1
        self.items.extend(items)
        if self.form == "text":
            for item in items:
                print(text_line(item), file=self.out)
        elif self.form == "github":
            for item in items:
                print(github_line(item), file=self.out)
        self.out.flush()

    def note(self, path: str, text: str) -> None:
        """Something of `path` that was not checked (also said on stderr by the caller)."""
        self.notes.append((path, text))

    def finish(self, files: int) -> None:
        if self.form == "json":
            json.dump(self.items, self.out, indent=2)
            print(file=self.out)
        elif self.form == "sarif":
            json.dump(sarif(self.items, self.notes), self.out, indent=2)
            print(file=self.out)
        elif self.form == "text":
            problems = sum(1 for item in self.items if item["kind"] != "deprecated")
            deprecated = len(self.items) - problems
            parts = [f"{problems} problem{'s' if problems != 1 else ''}"]
            if deprecated:
                parts.append(f"{deprecated} deprecation{'s' if deprecated != 1 else ''}")
            print(f"Found {' and '.join(parts)} in {self.files_with_findings} of {files} file{'s' if files != 1 else ''} checked.", file=self.out)
        self.out.flush()
