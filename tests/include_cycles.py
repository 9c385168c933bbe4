#!/usr/bin/env python3
"""include_cycles.py - no include cycle between the library's files.

A file and its header are one node (x.c and x.h are "x", and so is a
private header x_internal.h shared by x's files): x.c including y.h while
y.c includes x.h is a cycle even though no header includes itself. The
edges are the quoted includes of src/, codes/ and transport/ that name one
of their headers.

usage: tests/include_cycles.py SOURCE_DIR
Exit status: 0 without a cycle; 1 printing each cycle found.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def node_of(path):
    name = os.path.splitext(os.path.basename(path))[0]
    return name[: -len("_internal")] if name.endswith("_internal") else name


def library_files(root):
    for top in ("src", "codes", "transport"):
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith((".c", ".h")) and not name.endswith("_main.c"):
                    yield os.path.join(folder, name)


def graph(root):
    files = list(library_files(root))
    nodes = {node_of(f) for f in files}
    edges = {n: set() for n in nodes}
    for path in files:
        node = node_of(path)
        with open(path, encoding="utf-8") as text:
            for line in text:
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = node_of(match.group(1))
                if target in nodes and target != node:
                    edges[node].add(target)
    return edges


def cycles(edges):
    """One cycle per strongly connected component of more than one node."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found = cycles(graph(root))
    for component in found:
        print("include cycle among: " + ", ".join(component))
    if not found:
        print("include cycles: none")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
