"""`larev cache verify`: which cached step entries of a store today's code can still reach, and pruning the rest.

An entry is a cache record `<root>/_prefect/results/<key>` (what Prefect reads to serve a step from cache) with its
step record `<root>/_prefect/steps/<key>.json` (tasks/runtime/cache.py) and the step's outputs
`<root>/<step>/<key>/`. Today's code reaches an entry when the key it computes for the same arguments is the
entry's key: the step record holds the arguments as they entered the key, so the key is recomputed with today's
code version of the step (its module and every project module it imports, tasks/runtime/source_graph.py). An
entry is

- `current`: today's code gives the same key; a run with these inputs is served from it;
- `upstream-stale`: today's code gives the same key, but an input was written by a stale (or upstream-stale) entry:
  it is served only if that step's rerun writes its outputs again byte for byte (CPU training is not always
  bitwise reproducible, so expect it to rerun);
- `stale`: today's code gives another key (the record says which modules changed): the step reruns, and the entry
  is never read again;
- `unverifiable`: no readable step record (written before larev kept them, or not by larev): no key of today's code
  is known to reach it.

`prune` deletes stale and unverifiable entries: the cache record, the step record and the output folders
(upstream-stale entries stay: they may still be reached). A finished run whose models were pruned can no longer
score new rationales (`larev score --run`) until it is run again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from storage import ArtifactStore
from tasks.runtime.cache import STEP_RECORDS, step_fingerprint
from tasks.runtime.source_graph import larev_version, step_code_of

RESULTS = "_prefect/results"


@dataclass
class EntryStatus:
    key: str
    step: str  # '?' when no step record names it
    status: str  # current | upstream-stale | stale | unverifiable
    why: str = ""
    changed_modules: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)  # the entry's output folders (store keys)
    inputs: list[str] = field(default_factory=list, repr=False)  # digests of the artifacts it read
    written: list[str] = field(default_factory=list, repr=False)  # digests of the artifacts it wrote


def _today_code(task_name: str):
    """Today's StepCode of the step function `module:name`, or None when today's source no longer defines it (read
    from the source: a step record may have been planted, so nothing it names is imported)."""
    module, _, name = task_name.partition(":")
    if not module or not name:
        return None
    return step_code_of(module, name)


def _changed(recorded: dict[str, str], today: dict[str, str]) -> list[str]:
    """Modules whose source differs, with '+' for modules the step imports now and did not, '-' for the reverse."""
    out = [m for m in sorted(set(recorded) & set(today)) if recorded[m] != today[m]]
    out += [f"+{m}" for m in sorted(set(today) - set(recorded))]
    out += [f"-{m}" for m in sorted(set(recorded) - set(today))]
    return out


def check_entry(key: str, record: dict | None) -> EntryStatus:
    """The status of the entry `key` given its step record (None: missing or unreadable)."""
    if record is None:
        return EntryStatus(key, "?", "unverifiable", "no step record: written before larev kept them, or not by "
                                                      "larev; no key of today's code is known to reach it")
    step, args, code = record.get("step", "?"), record.get("args"), record.get("code")
    if not isinstance(args, dict) or step_fingerprint(step, str(code), args) != key:
        return EntryStatus(key, step, "unverifiable", "its step record does not give its key back")
    today = _today_code(str(record.get("task", "")))
    if today is None:
        return EntryStatus(key, step, "stale", f"the step function {record.get('task')} no longer exists")
    if step_fingerprint(step, today.version, args) == key:
        return EntryStatus(key, step, "current")
    changed = _changed(record.get("modules") or {}, today.modules)
    why = []
    if record.get("larev_version") != today.larev_version:
        why.append(f"larev {record.get('larev_version')} -> {today.larev_version}")
    if changed:
        shown = ", ".join(changed[:6]) + (" ..." if len(changed) > 6 else "")
        why.append(f"{len(changed)} module(s) changed: {shown}")
    return EntryStatus(key, step, "stale", "; ".join(why) or "another code version", changed)


def input_digests(args) -> list[str]:
    """The artifact digests in a step record's arguments (canonical refs are `{"ref": digest}`)."""
    if isinstance(args, dict):
        if set(args) == {"ref"} and isinstance(args["ref"], str):
            return [args["ref"]]
        args = list(args.values())
    if isinstance(args, list):
        return sorted({d for item in args for d in input_digests(item)})
    return []


def mark_upstream_stale(statuses: list[EntryStatus]) -> None:
    """Current entries that read an artifact a stale entry wrote become `upstream-stale`, transitively."""
    tainted = {d: s.step for s in statuses if s.status == "stale" for d in s.written}
    changed = True
    while changed:
        changed = False
        for s in statuses:
            if s.status != "current":
                continue
            upstream = sorted({tainted[d] for d in s.inputs if d in tainted})
            if upstream:
                s.status, s.why = "upstream-stale", "reads outputs of stale step(s) " + ", ".join(upstream)
                tainted.update({d: s.step for d in s.written})
                changed = True


def _read_record(store: ArtifactStore, key: str) -> dict | None:
    try:
        record = store.read_json(f"{STEP_RECORDS}/{key}.json")
    except Exception:  # noqa: BLE001 - missing, unreadable or corrupt: the entry is unverifiable
        return None
    return record if isinstance(record, dict) else None


def _output_folders(store: ArtifactStore) -> dict[str, list[str]]:
    """key -> the output folders `<step>/<key>` under the store root."""
    out: dict[str, list[str]] = {}
    for top in store.ls():
        if top.startswith("_"):
            continue
        for entry in store.ls(top):
            out.setdefault(entry.rpartition("/")[2], []).append(entry)
    return out


def verify(store: ArtifactStore) -> list[EntryStatus]:
    """The status of every cache record in `store`, sorted by step and key."""
    folders = _output_folders(store)
    statuses = []
    for path in store.ls(RESULTS):
        key = path.rpartition("/")[2]
        record = _read_record(store, key)
        status = check_entry(key, record)
        status.outputs = folders.get(key, [])
        if record is not None:
            status.inputs, status.written = input_digests(record.get("args")), list(record.get("outputs") or [])
        if status.step == "?" and status.outputs:
            status.step = status.outputs[0].partition("/")[0]  # named by the folder it wrote
        statuses.append(status)
    mark_upstream_stale(statuses)
    return sorted(statuses, key=lambda s: (s.step, s.key))


def orphan_records(store: ArtifactStore) -> list[str]:
    """Step records with no cache record (the step failed after its record was written, or the record went)."""
    records = {p.rpartition("/")[2] for p in store.ls(RESULTS)}
    return [p for p in store.ls(STEP_RECORDS) if p.rpartition("/")[2].removesuffix(".json") not in records]


def prune(store: ArtifactStore, statuses: list[EntryStatus]) -> dict[str, int]:
    """Delete the stale and unverifiable entries (cache record first, so a prune cut short leaves no record that
    points at deleted outputs) and orphan step records. Counts of what went."""
    gone = {"entries": 0, "output_folders": 0, "orphan_records": 0}
    for s in statuses:
        if s.status in ("current", "upstream-stale"):
            continue
        store.delete(f"{RESULTS}/{s.key}")
        store.delete(f"{STEP_RECORDS}/{s.key}.json")
        for folder in s.outputs:
            gone["output_folders"] += bool(store.delete(folder))
        gone["entries"] += 1
    for path in orphan_records(store):
        gone["orphan_records"] += bool(store.delete(path))
    return gone


def summary(store: ArtifactStore, statuses: list[EntryStatus]) -> str:
    """What `larev cache verify` prints: counts, then one line per step and status with the reasons."""
    counts = {k: sum(s.status == k for s in statuses) for k in ("current", "upstream-stale", "stale", "unverifiable")}
    lines = [f"store {store.root}: {len(statuses)} cached step entries under larev {larev_version()}: "
             + ", ".join(f"{n} {k}" for k, n in counts.items())]
    if not statuses:
        return lines[0]
    lines.append(f"{'step':<24} {'status':<14} {'entries':>7}  why")
    grouped: dict[tuple[str, str, str], int] = {}
    for s in statuses:
        grouped[(s.step, s.status, s.why)] = grouped.get((s.step, s.status, s.why), 0) + 1
    for (step, status, why), n in sorted(grouped.items()):
        lines.append(f"{step:<24} {status:<14} {n:>7}  {why}".rstrip())
    if counts["stale"] or counts["unverifiable"]:
        lines.append("stale and unverifiable entries are never served again: `larev cache verify --prune` deletes "
                     "them with their outputs")
    return "\n".join(lines)


def as_json(statuses: list[EntryStatus]) -> str:
    return json.dumps([{k: v for k, v in asdict(s).items() if k not in ("inputs", "written")} for s in statuses],
                      indent=1)
