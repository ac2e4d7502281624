#!/usr/bin/env python3
"""Check a Grafana dashboard against what `blkqos metrics` emits: every
PromQL expression (panel targets and templating queries) names at least
one metric, and only metrics whose families the given exposition has.

Usage: check.py DASHBOARD.json METRICS.prom [--documented docs/monitoring.md]
(prints the problems; exit 1 if any)

A family with no samples is not in the exposition at all (the lease's
limit while no lease holds, the knobs on a kernel without them), so one
reading cannot show every family: with --documented, the families of the
metric table of docs/monitoring.md count as emitted too. Run it on an exposition with a
live lease as well (tests/monitoring/run does), so that a name that is
documented but no longer emitted is caught there.
"""
import json
import re
import sys

# PromQL words that look like names: aggregations, operators, modifiers.
KEYWORDS = {
    "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
    "group_left", "group_right", "inf", "nan", "atan2",
}
# (...) after these lists labels, not metrics
LABEL_LISTS = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def metric_names(expr):
    """The metric names an expression reads."""
    e = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)   # string literals
    e = re.sub(r"\{[^}]*\}", "", e)                 # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                # ranges
    e = LABEL_LISTS.sub(" ", e)
    e = re.sub(r"\$\{?\w+\}?", "", e)               # dashboard variables
    # label_values(metric, label): the second argument is a label
    e = re.sub(r"label_values\s*\(\s*([a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)", r"\1", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][\w:]*", e):
        word, rest = m.group(0), e[m.end():].lstrip()
        if word in KEYWORDS or rest.startswith("("):
            continue   # a keyword or a function
        if re.fullmatch(r"\d+\w*", word):
            continue
        names.add(word)
    return names


def expressions(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("expr", "query") and isinstance(v, str) and v != "prometheus":
                yield v
            else:
                yield from expressions(v)
    elif isinstance(node, list):
        for v in node:
            yield from expressions(v)


def emitted(text):
    """Series names the exposition has: each family's samples."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
    return names


def documented(text):
    """Families named in the first column of the metric table of docs/monitoring.md."""
    return set(re.findall(r"^\| `(blkqos_\w+)` \|", text, re.M))


def main():
    args = sys.argv[1:]
    readme = None
    if "--documented" in args:
        i = args.index("--documented")
        readme = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    dashboard, metrics = args
    with open(dashboard) as f:
        dash = json.load(f)
    with open(metrics) as f:
        have = emitted(f.read())
    if readme:
        with open(readme) as f:
            have |= documented(f.read())
    problems = []
    exprs = list(expressions(dash))
    if not exprs:
        problems.append("no PromQL expressions found")
    for expr in exprs:
        names = metric_names(expr)
        if not names:
            problems.append(f"names no metric: {expr}")
        for n in sorted(names - have):
            problems.append(f"{n}: not emitted by blkqos metrics (in {expr})")
    for p in problems:
        print(p)
    print(f"{len(exprs)} expressions, {len(set().union(*map(metric_names, exprs)))} metrics, "
          f"{len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
