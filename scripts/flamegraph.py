#!/usr/bin/env python3
"""A flamegraph (SVG) from `perf script` output, with no other tool.

    perf record --call-graph dwarf -F 499 -o perf.data -- COMMAND
    perf script -i perf.data | scripts/flamegraph.py "title" > flame.svg

Stacks are merged by function name (the last `::`-path kept short), the root is the whole run,
and each frame's width is its share of the samples (hover for the count and the percentage).
`--top N` prints the N widest frames (inclusive share) instead of the SVG.
"""
import html
import zlib
import re
import sys
from collections import defaultdict

ROW, WIDTH, MIN_PX = 16, 1800, 2.0


def short(sym):
    sym = re.sub(r"\+0x[0-9a-f]+$", "", sym.strip())
    sym = re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", sym))  # generics, two levels
    return sym or "?"


def stacks(lines):
    """Yield (comm, frames outermost first) per sample."""
    comm, frames = None, []
    for line in lines:
        if not line.strip():
            if comm is not None:
                yield comm, frames[::-1]
            comm, frames = None, []
        elif not line[0].isspace():
            # A sample's header (`comm pid time: count event:`); anything else is not a sample.
            comm, frames = (line.split()[0], []) if ":" in line else (None, [])
        elif comm is not None:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                frames.append(short(parts[1].rsplit(" (", 1)[0]))
    if comm is not None:
        yield comm, frames[::-1]


def tree(samples):
    root = {"n": 0, "kids": {}}
    for comm, frames in samples:
        node = root
        node["n"] += 1
        for f in [comm] + frames:
            node = node["kids"].setdefault(f, {"n": 0, "kids": {}})
            node["n"] += 1
    return root


def svg(root, title):
    total = root["n"] or 1
    rects = []

    def walk(node, name, x, depth):
        w = node["n"] / total * WIDTH
        if w < MIN_PX:
            return
        rects.append((x, depth, w, name, node["n"]))
        cx = x
        for k, kid in sorted(node["kids"].items()):
            walk(kid, k, cx, depth + 1)
            cx += kid["n"] / total * WIDTH

    walk(root, "all", 0.0, 0)
    depth = max(d for _, d, _, _, _ in rects) + 1
    h = (depth + 2) * ROW
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" font-family="monospace" font-size="11">',
           f'<text x="4" y="{ROW - 3}">{html.escape(title)} ({total} samples)</text>']
    for x, d, w, name, n in rects:
        y = h - (d + 1) * ROW
        hue = 20 + zlib.crc32(name.encode()) % 40  # stable across runs, unlike hash()
        label = html.escape(name)
        out.append(f'<g><title>{label}: {n} samples, {100 * n / total:.2f}%</title>'
                   f'<rect x="{x:.1f}" y="{y}" width="{max(w - 0.3, 0.1):.1f}" height="{ROW - 1}" fill="hsl({hue},80%,60%)"/>')
        chars = int(w / 6.6)
        if chars >= 3:
            text = name if len(name) <= chars else name[: chars - 2] + ".."
            out.append(f'<text x="{x + 2:.1f}" y="{y + ROW - 4}">{html.escape(text)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def main():
    args = sys.argv[1:]
    top = None
    if args[:1] == ["--top"]:
        if len(args) < 2 or not args[1].isdigit() or int(args[1]) == 0:
            sys.exit("usage: perf script | flamegraph.py [--top N (N >= 1)] [TITLE]")
        top, args = int(args[1]), args[2:]
    title = args[0] if args else "flamegraph"
    samples = list(stacks(sys.stdin))
    if not samples:
        sys.exit("flamegraph.py: no samples on standard input (expected `perf script` output)")
    if top is not None:
        incl = defaultdict(int)
        for _, frames in samples:
            for f in set(frames):
                incl[f] += 1
        for f, n in sorted(incl.items(), key=lambda kv: -kv[1])[:top]:
            print(f"{100 * n / len(samples):6.2f}%  {f}")
        return
    sys.stdout.write(svg(tree(samples), title))


if __name__ == "__main__":
    main()
