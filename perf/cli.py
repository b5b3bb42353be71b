"""``python -m perf``: run the benchmark suites, compare two runs, report one, validate a file.

    python -m perf run [--suite NAME[,NAME]|all] [--device cpu|cuda] [--quick] [--json FILE] [-k TEXT]
                       [--no-torch] [--shard K/N]
    python -m perf compare BASE.json[,BASE2.json ...] NEW.json[,NEW2.json ...]
                           [--threshold 0.1] [--format table|markdown|json]
    python -m perf report FILE.json [--plot out.png]
    python -m perf validate FILE.json [FILE.json ...]

``python -m perf`` alone (or with only options, e.g. ``--quick``) means ``run``.
Exit status: 0 on success; ``compare`` 1 when a row regressed; ``validate`` 1 when a file is
invalid; 2 for usage errors and unreadable files.
"""
import argparse
import sys

from perf import schema

COMMANDS = ("run", "compare", "report", "validate")


def parser():
    p = argparse.ArgumentParser(prog="python -m perf", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the benchmark suites")
    run.add_argument("--suite", default="all", metavar="NAME",
                     help="a suite, several separated by commas, or all (default); suites: "
                          "elementwise, reductions, matmul, softmax, autodiff, checkpointing, "
                          "quantized, startup, cuda")
    run.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                     help="where Ember's tensors live (default cpu)")
    run.add_argument("--quick", action="store_true",
                     help="5 samples of >= 5 ms (at most ~1 s) per row instead of 21 of >= 20 ms")
    run.add_argument("--json", metavar="FILE", help="write the results to FILE")
    run.add_argument("-k", metavar="TEXT", default="",
                     help="only the benchmarks whose name contains TEXT")
    run.add_argument("--no-torch", action="store_true",
                     help="do not import PyTorch, even when it is installed (no torch column)")
    run.add_argument("--shard", metavar="K/N",
                     help="only every N-th benchmark case, from the K-th: N processes with K = "
                          "1..N run every case between them (make perf-smoke runs two)")

    cmp = sub.add_parser("compare", help="compare two results files (exit 1 on a regression)")
    cmp.add_argument("base", metavar="BASE.json",
                     help="a results file, or several runs of one tree separated by commas "
                          "(their samples are pooled per row)")
    cmp.add_argument("new", metavar="NEW.json", help="the same, of the new tree")
    cmp.add_argument("--threshold", type=float, default=0.1,
                     help="smallest relative change that counts (default 0.1: 10%%)")
    cmp.add_argument("--format", choices=("table", "markdown", "json"), default="table")

    rep = sub.add_parser("report", help="print the table of a results file")
    rep.add_argument("file", metavar="FILE.json")
    rep.add_argument("--plot", metavar="OUT.png",
                     help="also draw a bar chart of Ember vs peers (needs matplotlib: ember[plot])")

    val = sub.add_parser("validate", help="check results files against their schema")
    val.add_argument("files", metavar="FILE.json", nargs="+")
    return p


def cmd_run(args):
    from perf import run   # imports Ember, numpy and (when installed) PyTorch

    return run.main(args)


def cmd_compare(args):
    from perf import compare

    base, new = (compare.pool([schema.load(p) for p in files.split(",")])
                 for files in (args.base, args.new))
    comparisons = compare.compare(base, new, args.threshold)
    differences = compare.environment_differences(base, new)
    warnings = compare.load_warnings(base, new)
    print(compare.FORMATS[args.format](comparisons, args.threshold, differences, warnings))
    return compare.exit_status(comparisons)


def cmd_report(args):
    from perf import goals, report

    doc = schema.load(args.file)
    print(report.describe(doc))
    print()
    print(report.table(doc))
    print()
    print(goals.table(doc))
    if args.plot:
        try:
            report.plot(doc, args.plot)
        except ImportError:
            print("perf report: --plot needs matplotlib (pip install 'ember[plot]')", file=sys.stderr)
            return 1
        print(f"\nwrote {args.plot}")
    return 0


def cmd_validate(args):
    status = 0
    for path in args.files:
        try:
            doc = schema.load(path)
        except schema.SchemaError as e:
            print(f"INVALID {e}")
            status = 1
            continue
        version = doc.get("upgraded_from", schema.SCHEMA_VERSION)
        print(f"ok {path}: schema version {version}, {len(doc['rows'])} rows")
    return status


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv.insert(0, "run")   # `python -m perf --quick`: the first perf/run.py's usage
    args = parser().parse_args(argv)
    try:
        return {"run": cmd_run, "compare": cmd_compare, "report": cmd_report,
                "validate": cmd_validate}[args.command](args)
    except schema.SchemaError as e:
        print(f"perf {args.command}: {e}", file=sys.stderr)
        return 2
