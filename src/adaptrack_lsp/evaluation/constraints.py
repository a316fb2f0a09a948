"""Where the evaluation's API constraint comes from, and the TFv1 settings' indexes.

The TensorFlow API is a snapshot (`constrainers.snapshot` format): the committed TF
snapshot by default (`bundled_snapshot("tensorflow")`), a snapshot file
(``--api-snapshot``), or a walk of another interpreter's TensorFlow (``--python``, the
same contained walk as the ``index`` command: `constrainers.snapshot.walk_snapshot`).  From it:

- v2 setting (TFv1 v2, TFv1Real): `SnapshotIndex` of the snapshot, every TF 2 name;
- v1 setting: the ``tensorflow.compat.v1.X`` names as ``tensorflow.X``
  (`compat_v1_as_root`, paper §6.1).

`APIConstraintProvider` turns an index into, per item, the token constraint the server
uses too (`constrainers.environment.token_constraint`: the API monitor started on the
item's prompt, over the model's vocabulary), and
answers whether the constraint accepts the item's oracle (constraint recall).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from adaptrack_lsp.evaluation.items import EvalItem

log = logging.getLogger(__name__)

#: seconds allowed for walking TensorFlow's API in another interpreter
WALK_TIMEOUT_S = 1200


@dataclass
class APISnapshot:
    """One TensorFlow API snapshot (dict in the snapshot format) and where it came from."""

    data: dict[str, Any]
    source: str

    @property
    def names(self) -> list[str]:
        return list(self.data["names"])


def load_api_snapshot(snapshot: str | None = None, python: str | None = None) -> APISnapshot:
    """The TF API from a snapshot file, another interpreter's TensorFlow, or the committed snapshot."""
    # imported through api_index: importing constrainers.snapshot first is circular
    from adaptrack_lsp.apis.index import SnapshotError, read_snapshot
    from adaptrack_lsp.apis.snapshot import walk_snapshot

    if snapshot is not None and python is not None:
        raise ValueError("give either an API snapshot or a Python interpreter, not both")
    try:
        if python is not None:
            try:
                data = walk_snapshot(python, "tensorflow", timeout_s=WALK_TIMEOUT_S)
            except RuntimeError as error:
                raise ValueError(str(error)) from None
            origin = f"tensorflow {data.get('version')} in {python}"
        else:
            if snapshot is None:
                from adaptrack_lsp.apis.index import bundled_snapshot

                try:
                    snapshot = bundled_snapshot("tensorflow")
                except FileNotFoundError as error:
                    raise ValueError(f"{error}; pass --api-snapshot FILE or --python PATH") from None
            data = read_snapshot(snapshot)
            origin = f"snapshot {data.get('package')} {data.get('version')}"
    except SnapshotError as error:
        raise ValueError(str(error)) from None
    if data.get("root") != "tensorflow":
        raise ValueError(f"the API snapshot is of {data.get('root')!r}, TFv1 needs tensorflow")
    return APISnapshot(data, origin)


def setting_index(api: APISnapshot, setting: str):
    """`SnapshotIndex` for a TFv1 setting: "v2" = the snapshot, "v1" = compat.v1 as the root."""
    from adaptrack_lsp.apis.index import SnapshotIndex, compat_v1_as_root

    if setting == "v2":
        return SnapshotIndex(data=api.data)
    if setting == "v1":
        return SnapshotIndex(data=compat_v1_as_root(api.data))
    raise ValueError(f"unknown setting {setting!r}; choose v1 or v2")


class APIConstraintProvider:
    """Per item: `TokenIndex(ApiMonitor(index), vocab, context=the item's prompt)`."""

    def __init__(self, index, source: str | None = None):
        self.index = index
        self.source = source or getattr(index, "source", "")

    @staticmethod
    def context(item: EvalItem):
        from adaptrack_lsp.constrainers.api import ConstraintContext

        return ConstraintContext(document=item.prompt, prefix=item.prompt)

    def monitor(self):
        from adaptrack_lsp.constrainers.api import ApiMonitor

        return ApiMonitor(self.index)

    def token_constraint(self, item: EvalItem, lm):
        """The same assembly as the server's (`constrainers.environment.token_constraint`):
        the API monitor over the item's prompt (no healing: items end at a chain start;
        no clean-text part, as in the paper)."""
        from adaptrack_lsp.constrainers.environment import token_constraint

        # the per-vocabulary tables are cached by TokenTables.of
        return token_constraint(lm.vocab, index=self.index, document=item.prompt, prefix=item.prompt)

    def accepts(self, item: EvalItem) -> bool:
        """Whether the constraint lets the oracle chain be generated and end there (``(``)."""
        monitor = self.monitor()
        state = monitor.start(self.context(item))
        state = monitor.check(state, item.oracle)
        if state is None or not monitor.is_complete(state):
            return False
        return monitor.check(state, "(") is not None
