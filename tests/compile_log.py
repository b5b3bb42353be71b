"""Where a test run's Numba compile time goes: a log of every compile, and its summary.

``EMBER_COMPILE_LOG=<dir> pytest ...`` makes each test process (each pytest-xdist worker)
append one JSON line per top-level Numba compile to ``<dir>/<pid>.jsonl``: the kernel's
name, its argument types, the seconds it took (nested compiles included) and the test
that was running.  A compile loaded from the disk cache is not a compile and is not logged.

``python tests/compile_log.py <dir>`` then prints the totals: by test file, by kernel
template (the name before ``__``), and the compiles that more than one process repeated
(each xdist worker compiles a kernel the other has not saved yet).
"""
import collections
import json
import os
import sys
import time

_state = {"test": "(collection)", "depth": 0, "file": None}


def install(directory):
    """Log this process's compiles under ``directory`` (called by tests/conftest.py)."""
    from numba.core import event

    os.makedirs(directory, exist_ok=True)
    _state["file"] = open(os.path.join(directory, f"{os.getpid()}.jsonl"), "a", buffering=1)

    class _Listener(event.Listener):
        def on_start(self, ev):
            _state["depth"] += 1
            if _state["depth"] == 1:
                _state["start"] = time.perf_counter()

        def on_end(self, ev):
            _state["depth"] -= 1
            if _state["depth"]:
                return
            disp = ev.data["dispatcher"]
            record = {"test": _state["test"], "pid": os.getpid(),
                      "kernel": getattr(disp.py_func, "__name__", "?"),
                      "args": str(ev.data["args"]),
                      "seconds": round(time.perf_counter() - _state["start"], 4)}
            _state["file"].write(json.dumps(record) + "\n")

    event.register("numba:compile", _Listener())


def set_test(nodeid):
    _state["test"] = nodeid


def summary(directory, top=25):
    records = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".jsonl"):
            with open(os.path.join(directory, name)) as f:
                records += [json.loads(line) for line in f if line.strip()]
    total = sum(r["seconds"] for r in records)
    lines = [f"{len(records)} compiles in {len({r['pid'] for r in records})} processes, "
             f"{total:.0f} s of compile time"]

    def table(title, key):
        acc = collections.defaultdict(lambda: [0, 0.0])
        for r in records:
            a = acc[key(r)]
            a[0] += 1
            a[1] += r["seconds"]
        lines.append(f"\n{title}:")
        for k, (n, s) in sorted(acc.items(), key=lambda kv: -kv[1][1])[:top]:
            lines.append(f"  {s:8.1f} s  {n:5d}  {k}")

    table("by test file", lambda r: r["test"].split("::")[0])
    table("by kernel template", lambda r: r["kernel"].split("__")[0])
    table("by kernel", lambda r: r["kernel"])
    seen = collections.defaultdict(list)
    for r in records:
        seen[(r["kernel"], r["args"])].append(r)
    repeats = [rs for rs in seen.values() if len(rs) > 1]
    wasted = sum(sum(r["seconds"] for r in rs[1:]) for rs in repeats)
    lines.append(f"\n{len(repeats)} (kernel, signature) pairs compiled more than once: "
                 f"{wasted:.0f} s of repeated compile time")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(sys.argv[1], *(int(a) for a in sys.argv[2:3])))
