#!/usr/bin/env python3
"""Checks an SVG chart written by ckplan: well-formed XML, an <svg> root in the SVG
namespace, self-contained (no script, no external resource), a title, axis labels, and the
series and legend entries asked for on the command line.

usage: check_svg.py FILE [--series NAME,NAME...] [--min-series N] [--legend N]
  --series      every NAME must be the text of a legend entry (or start it)
  --min-series  at least N series (<g class="series">)
  --legend      exactly N legend entries
Exits 0 when every check passes, 1 with one line per failure otherwise."""
import argparse
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"


def classes(el):
    return (el.get("class") or "").split()


def text_of(el):
    return "".join(el.itertext()).strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--series", default="")
    ap.add_argument("--min-series", type=int, default=1)
    ap.add_argument("--legend", type=int, default=None)
    a = ap.parse_args()
    problems = []
    try:
        root = ET.parse(a.file).getroot()
    except (ET.ParseError, OSError) as e:
        print(f"{a.file}: not well-formed XML: {e}")
        return 1
    if root.tag != SVG + "svg":
        problems.append(f"root element is {root.tag}, not svg in the SVG namespace")
    for el in root.iter():
        tag = el.tag.replace(SVG, "")
        if tag in ("script", "foreignObject", "image"):
            problems.append(f"contains <{tag}>")
        for attr in ("href", XLINK_HREF):
            ref = el.get(attr)
            if ref is not None and not ref.startswith("#"):
                problems.append(f"<{tag}> refers to an external resource {ref!r}")
        if any(k.startswith("on") for k in el.attrib):
            problems.append(f"<{tag}> has an event handler")
    title = root.find(SVG + "title")
    titled = (title is not None and text_of(title)) or any(
        "chart-title" in classes(t) and text_of(t) for t in root.iter(SVG + "text"))
    if not titled:
        problems.append("no title")
    axis_labels = [t for t in root.iter(SVG + "text") if "axis-label" in classes(t) and text_of(t)]
    if len(axis_labels) < 2:
        problems.append(f"{len(axis_labels)} axis labels, wanted at least 2")
    series = [g for g in root.iter(SVG + "g") if "series" in classes(g)]
    if len(series) < a.min_series:
        problems.append(f"{len(series)} series, wanted at least {a.min_series}")
    for g in series:
        if not any(el.tag in (SVG + "polyline", SVG + "path", SVG + "circle", SVG + "rect",
                              SVG + "line") for el in g.iter()):
            t = g.find(SVG + "title")
            problems.append(f"series {text_of(t if t is not None else g)!r} draws nothing")
    legend = [text_of(t) for g in root.iter(SVG + "g") if "legend-item" in classes(g)
              for t in g.iter(SVG + "text")]
    if a.legend is not None and len(legend) != a.legend:
        problems.append(f"{len(legend)} legend entries {legend}, wanted {a.legend}")
    for name in filter(None, a.series.split(",")):
        if not any(entry == name or entry.startswith(name + ":") or entry.startswith(name + " ")
                   for entry in legend):
            problems.append(f"no legend entry for {name!r} (legend: {legend})")
    for p in problems:
        print(f"{a.file}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
