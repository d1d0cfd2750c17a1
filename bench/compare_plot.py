"""bench/compare --plot DIR: the comparison's rows as PNG pictures (matplotlib).

    bench/compare --link shm|tcp --json FILE --plot DIR      measure, then plot
    bench/compare --render FILE --plot DIR                   plot an earlier run

Figures, one per family of rows and link (LINK is shm or tcp):
  LINK-latency.png    put_lat, get_lat against message size: netvm beside
                      every peer (shm: the mapped rows and the CMA path's)
  LINK-bandwidth.png  put_bw, get_bw against message size
  LINK-one-size.png   the one-size rows (fadd_lat, am_lat, ptr_*, the rates)
                      as grouped bars: netvm and each peer
  LINK-events.png     the events table's rows, grouped bars
  services-LINK.png   bench/compare --services: the rows with a target,
                      netvm beside its peers and its own reference
Latency and size axes are logarithmic: the rows span four orders of
magnitude.  matplotlib is imported here only, so that bench/compare without
--plot needs nothing but the standard library.
"""

import os

MISSING = ("--plot needs matplotlib, which this python3 (%s) cannot import (%s).\n"
           "Install it with scripts/install-deps.sh, or: %s -m pip install matplotlib "
           "(Debian's /usr/bin/python3: apt-get install python3-matplotlib)")

# the families of rows drawn as lines against the message size
LINE_FAMILIES = [("latency", ["put_lat", "get_lat"]), ("bandwidth", ["put_bw", "get_bw"])]
# the peers in the tables' order: raw first, then the libraries
PEER_ORDER = ["memcpy", "process_vm", "tcp_poll", "tcp_sleep", "eventfd", "ucx", "oshmem"]
# a fixed colour per column, so that a peer looks the same in every figure
COLOURS = {
    "netvm": "#1f3a93", "netvm_sleep": "#6c8ebf", "netvm_put": "#8e44ad", "netvm ref": "#8e44ad",
    "memcpy": "#2ca02c", "process_vm": "#17becf", "tcp_poll": "#2ca02c", "tcp_sleep": "#98df8a",
    "ucx": "#d62728", "oshmem": "#ff7f0e", "eventfd": "#7f7f7f",
}


class PlotUnavailable(Exception):
    """matplotlib cannot be imported: --plot says how to install it."""


def pyplot():
    """matplotlib.pyplot drawing to files only (Agg: no display needed)."""
    import sys
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise PlotUnavailable(MISSING % (sys.executable, e, sys.executable))
    return plt


def size_text(size):
    for unit, factor in (("M", 1 << 20), ("K", 1 << 10)):
        if size >= factor and size % factor == 0:
            return "%d%s" % (size // factor, unit)
    return str(size)


def colour(column):
    """The column's colour; "netvm CMA" takes netvm's (drawn dashed)."""
    return COLOURS.get(column, COLOURS.get(column.split(" ")[0]))


# ---------------------------------------------------------------- which rows

def is_services(rows):
    """A --services JSON: its rows with a target carry the target's text."""
    return any("target" in r for r in rows)


def services_link(rows):
    return "tcp" if any("tcp_poll" in r.get("peers", {}) for r in rows) else "shm"


def line_series(rows, metric):
    """{label: [(size, value)]} of one metric: netvm's columns and every
    peer's.  On shm the CMA path's rows (metric + "_cma") are drawn beside
    the mapped ones, netvm's labelled "netvm CMA"."""
    series = {}
    for r in rows:
        if r["metric"] not in (metric, metric + "_cma"):
            continue
        cma = r["metric"].endswith("_cma")
        cols = [("netvm", r.get("netvm")), ("netvm_sleep", r.get("netvm_sleep"))]
        cols += list(r.get("peers", {}).items())     # the table's order
        for col, v in cols:
            if col == "netvm_sleep" and "netvm_sleep" not in r:
                continue
            label = col + (" CMA" if cma and col.startswith("netvm") else "")
            series.setdefault(label, [])
            if v is not None:
                series[label].append((r["size"], v))
    return {k: sorted(v) for k, v in series.items() if v}


NETVM_COLUMNS = ("netvm", "netvm_sleep", "netvm_put")


def column_value(row, column):
    """A row's number of one column: netvm's keys, its reference row
    (services: key netvm_ref) or a peer's."""
    if column == "netvm ref":
        return row.get("netvm_ref")
    if column in NETVM_COLUMNS:
        return row.get(column)
    return row.get("peers", {}).get(column)


def bar_groups(rows, columns):
    """[(group label, unit, {column: value})] of one-size rows; a column
    without a number has no bar."""
    groups = []
    for r in rows:
        vals = {col: column_value(r, col) for col in columns}
        vals = {col: v for col, v in vals.items() if v is not None}
        label = r["metric"] if r.get("size") in (0, 8) else "%s %s" % (r["metric"], size_text(r["size"]))
        label = label.replace("_cma", "\n(CMA path)")   # long names overlap their neighbours
        groups.append((label, r["unit"], vals))
    return groups


def bar_columns(rows, first):
    """The bar columns of rows, netvm's first, then every peer present."""
    cols = [c for c in first if any(c in r or (c == "netvm ref" and "netvm_ref" in r) for r in rows)]
    peers = {p for r in rows for p in r.get("peers", {})}
    known = [p for p in PEER_ORDER if p in peers]
    return cols + known + sorted(peers - set(known))


# ---------------------------------------------------------------- drawing

def draw_lines(plt, rows, metrics, unit, title, path, source):
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.2 * len(metrics), 4.6), squeeze=False)
    drawn = False
    for ax, metric in zip(axes[0], metrics):
        series = line_series(rows, metric)
        sizes = sorted({s for pts in series.values() for s, _ in pts})
        for label, pts in series.items():
            xs, ys = [s for s, _ in pts], [v for _, v in pts]
            netvm = label.startswith("netvm")
            ax.plot(xs, ys, marker="o" if netvm else "s", markersize=4,
                    linewidth=2.4 if netvm else 1.3, linestyle="--" if label.endswith("CMA") else "-",
                    color=colour(label), label=label)
            drawn = True
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        if sizes:
            ax.set_xticks(sizes)
            ax.set_xticklabels([size_text(s) for s in sizes])
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("%s (%s)" % (metric, unit))
        ax.set_title(metric)
        ax.grid(True, which="major", alpha=0.3)
        if series:
            ax.legend(fontsize=8)
    return finish(plt, fig, title, path, source) if drawn else close(plt, fig)


def draw_bars(plt, groups, columns, title, path, source, notes=None):
    """Grouped bars, one panel per unit (us, MB/s, Mops do not share an
    axis); a logarithmic axis where a panel's values span over 20x."""
    units = []
    for _, unit, vals in groups:
        if vals and unit not in units:
            units.append(unit)
    if not units:
        return None
    widest = max(sum(1 for g in groups if g[1] == u and g[2]) for u in units)
    per_group = 1.7 if notes else 1.0     # the targets' text under each group
    fig, axes = plt.subplots(len(units), 1, figsize=(max(7.0, 1.5 + per_group * widest), 3.9 * len(units)),
                             squeeze=False)
    for ax, unit in zip(axes[:, 0], units):
        mine = [(i, g) for i, g in enumerate(groups) if g[1] == unit and g[2]]
        # only the columns with a bar in this panel take a slot in its groups
        cols = [c for c in columns if any(c in g[2] for _, g in mine)]
        width = min(0.8 / max(1, len(cols)), 0.22)   # a lone group keeps slim bars
        values = [v for _, g in mine for v in g[2].values()]
        for j, col in enumerate(cols):
            xs = [k + (j - (len(cols) - 1) / 2) * width for k, (_, g) in enumerate(mine) if col in g[2]]
            ys = [g[2][col] for _, g in mine if col in g[2]]
            if xs:
                bars = ax.bar(xs, ys, width, color=colour(col), label=col)
                for b, y in zip(bars, ys):
                    ax.annotate("%.3g" % y, (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom",
                                fontsize=6, rotation=90, xytext=(0, 2), textcoords="offset points")
        if values and max(values) > 20 * min(values):
            ax.set_yscale("log")
        ax.margins(y=0.25)
        ax.set_xlim(-0.7, len(mine) - 0.3)
        ax.set_xticks(range(len(mine)))
        ax.set_xticklabels([g[0] + ("\n" + notes[i] if notes and notes[i] else "") for i, g in mine],
                           fontsize=8)
        ax.set_ylabel(unit)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncol=min(len(cols), 6))
    return finish(plt, fig, title, path, source)


def finish(plt, fig, title, path, source):
    fig.suptitle(title)
    fig.text(0.995, 0.005, "from %s" % os.path.basename(source), ha="right", va="bottom",
             fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(path, dpi=110)
    close(plt, fig)
    return path


def close(plt, fig):
    plt.close(fig)
    return None


# ---------------------------------------------------------------- the figures

def plot_main(c, plt, rows, outdir, source):
    """The four figures of a main-table JSON (bench/compare --link)."""
    main, events = c.split_rows(rows)
    link = c.rows_link(main or rows)
    written = []
    for family, metrics in LINE_FAMILIES:
        unit = c.UNITS[metrics[0]]
        kind = "one-way latency" if family == "latency" else "bandwidth (1 MB = 1e6 B)"
        written.append(draw_lines(plt, main, metrics, unit,
                                  "netvm and its peers, %s link: %s against message size" % (link, kind),
                                  os.path.join(outdir, "%s-%s.png" % (link, family)), source))
    sized = {m for _, ms in LINE_FAMILIES for m in ms}
    one = [r for r in main if r["metric"].replace("_cma", "") not in sized]
    written.append(draw_bars(plt, bar_groups(one, bar_columns(one, ["netvm", "netvm_sleep"])),
                             bar_columns(one, ["netvm", "netvm_sleep"]),
                             "netvm and its peers, %s link: one-size rows" % link,
                             os.path.join(outdir, "%s-one-size.png" % link), source))
    if events:
        cols = bar_columns(events, ["netvm", "netvm_put"])
        written.append(draw_bars(plt, bar_groups(events, cols), cols,
                                 "events, %s link: netvm, its own put (netvm_put) and the peers" % link,
                                 os.path.join(outdir, "%s-events.png" % link), source))
    return [w for w in written if w]


def plot_services(plt, rows, outdir, source):
    """bench/compare --services: the rows with a target, as grouped bars."""
    link = services_link(rows)
    targeted = [r for r in rows if r.get("target")]
    cols = bar_columns(targeted, ["netvm", "netvm ref"])
    notes = ["%s\nmet: %s" % (r["target"].replace(", ", ",\n"), r.get("met", "-")) for r in targeted]
    path = draw_bars(plt, bar_groups(targeted, cols), cols,
                     "services, %s link: netvm beside its peers (netvm ref: netvm's own reference row)" % link,
                     os.path.join(outdir, "services-%s.png" % link), source, notes)
    return [path] if path else []


def plot_rows(c, rows, outdir, source):
    """Write the figures of a comparison's rows into outdir; their paths."""
    plt = pyplot()
    os.makedirs(outdir, exist_ok=True)
    if is_services(rows):
        return plot_services(plt, rows, outdir, source)
    return plot_main(c, plt, rows, outdir, source)
