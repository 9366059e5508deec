"""CrystalDiskMark's and KDiskMark's text export ("Copy" / "Save text"), read and written.

The layouts read here, confirmed from public samples (the samples in
``tests/fixtures/interop/`` are written for the tests in these layouts, with made-up figures):

* CrystalDiskMark 3.0.x: ``Sequential Read :  505.825 MB/s``, ``Random Read 512KB``,
  ``Random Read 4KB (QD=32) : ... [ 66371.9 IOPS]``; footer ``Test : 1000 MB [C: ...] (x5)``.
  Test names are those of iolab's ``crystaldiskmark3`` recipe (Seq, 512K, 4K, 4K-QD32). The
  block sizes are not in the text and stay empty.
* CrystalDiskMark 5.x/6.x: ``Sequential Read (Q= 32,T= 1) :  471.231 MB/s``,
  ``Random Read 4KiB (Q=  8,T= 8) : ... [ 96167.0 IOPS]`` (the sequential block size is not in the
  text and stays empty).
* CrystalDiskMark 7.x/8.x and KDiskMark (1.6 to 3.2): ``[Read]`` / ``[Write]`` / ``[Mix] Read 70%/Write
  30%`` sections of ``SEQ    1MiB (Q=  8, T= 1):  7427.749 MB/s [ 7083.7 IOPS] < 987.81 us>``
  (KDiskMark: ``Sequential   1 MiB (Q=  8, T= 1): ...``); footer ``Profile``, ``Test``, ``Mode``,
  ``Time``, ``Date``, ``OS``.

What each figure is, kept as it is: MB/s are 10^6 bytes/s in both tools (column ``bw_mbps``);
CrystalDiskMark's ``us`` is its mean latency per I/O (``lat_mean_us``); KDiskMark's is fio's mean
*completion* latency (``clat_mean_us``, an extra column; ``lat_mean_us`` stays empty). A ``[Mix]``
row is one figure for the mixed test (direction ``mix``). CrystalDiskMark shows the best of its passes;
KDiskMark's Default profile the mean of its passes.

:func:`render` writes an iolab run's figures in the 7.x/8.x layout, under a header that says iolab
wrote it (so a re-import knows what measured it).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from iolab.core.errors import IolabError

_UNITS = {"KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
_NUMBER = r"([\d.]+)"
# 7.x/8.x and KDiskMark: "  SEQ    1MiB (Q=  8, T= 1):  7427.749 MB/s [ 7083.7 IOPS] < 987.81 us>"
_NEW = re.compile(r"^\s*(SEQ|RND|Sequential|Random)\s+(\d+)\s*(KiB|MiB|GiB)\s*\(Q=\s*(\d+),\s*T=\s*(\d+)\)\s*:\s*"
                  + _NUMBER + r"\s*MB/s(?:\s*\[\s*" + _NUMBER + r"\s*IOPS\s*\])?(?:\s*<\s*" + _NUMBER + r"\s*us\s*>)?")
# 5.x/6.x: "  Random Read 4KiB (Q=  8,T= 8) :     7.892 MB/s [   1926.8 IOPS]"
_V6 = re.compile(r"^\s*(Sequential|Random)\s+(Read|Write)(?:\s+(\d+)\s*(KiB|MiB))?\s*\((?:Q=\s*(\d+)\s*,\s*)?T=\s*(\d+)\)"
                 r"\s*:\s*" + _NUMBER + r"\s*MB/s(?:\s*\[\s*" + _NUMBER + r"\s*IOPS\s*\])?")
# 3.x: "   Random Read 4KB (QD=32) :   271.859 MB/s [ 66371.9 IOPS]"
_V3 = re.compile(r"^\s*(Sequential|Random)\s+(Read|Write)(?:\s+(\d+)\s*KB)?(?:\s*\(QD=\s*(\d+)\))?\s*:\s*"
                 + _NUMBER + r"\s*MB/s(?:\s*\[\s*" + _NUMBER + r"\s*IOPS\s*\])?")
_SECTION = re.compile(r"^\s*\[(Read|Write|Mix)\](.*)$")
_FOOTER = re.compile(r"^\s*(Profile|Test|Mode|Time|Date|OS|Comment)\s*:\s*(.*?)\s*$")
_CDM = re.compile(r"CrystalDiskMark\s+(\d[\w.]*)(?:\s+(x64|x86|ARM64|A64))?")
_KDM = re.compile(r"KDiskMark(?:\s*\(([^)]+)\))?\s*:")
_IOLAB = re.compile(r"^\s*iolab\s+(\S+)\s+\(([^)]*)\):\s*CrystalDiskMark 8 layout, run\s+(\S+)", re.M)
_IOLAB_STATISTIC = re.compile(r"figures: (best|mean) of the passes")
_FIO = re.compile(r"Flexible I/O Tester\s*\((fio-[^)]+)\)")


@dataclass
class CdmText:
    """One text export: who wrote it (``tool``, ``version``), its rows and footer fields."""
    tool: str
    version: str | None
    layout: str
    rows: list[dict]
    footer: dict = field(default_factory=dict)
    fio_version: str | None = None
    mix: str | None = None
    source_run: str | None = None
    own_statistic: str | None = None

    @property
    def name(self) -> str:
        return f"{self.tool} {self.version}" if self.version else self.tool

    @property
    def statistic(self) -> str | None:
        """How the tool combined its passes, as the tool documents it (None: not known)."""
        if self.tool == "CrystalDiskMark":
            return "best"
        if self.tool == "iolab":
            return self.own_statistic
        if self.tool == "KDiskMark" and self.footer.get("Profile", "").startswith("Default"):
            return "mean"
        return None

    @property
    def passes(self) -> int | None:
        match = re.search(r"\(x(\d+)\)", self.footer.get("Test", ""))
        return int(match.group(1)) if match else None

    @property
    def size(self) -> str | None:
        match = re.match(r"\s*([\d.]+\s*[KMGT]i?B)", self.footer.get("Test", ""))
        return match.group(1) if match else None

    @property
    def drive(self) -> str | None:
        """The drive letter CrystalDiskMark tested (``D:``); KDiskMark's footer names none."""
        match = re.search(r"\[\s*([A-Za-z]:)", self.footer.get("Test", ""))
        return match.group(1) if match else None


def looks_like(text: str) -> bool:
    """Whether ``text`` is a CrystalDiskMark/KDiskMark text export (or iolab's in that layout)."""
    head = "\n".join(text.splitlines()[:6])
    return bool(_CDM.search(head) or "KDiskMark" in head or _IOLAB.search(head))


def _header(text: str, context: str) -> tuple[str, str | None, str | None]:
    head = "\n".join(text.splitlines()[:6])
    own = _IOLAB.search(head)
    if own:
        return "iolab", own.group(1), own.group(3)
    cdm = _CDM.search(head)
    if cdm:
        return "CrystalDiskMark", " ".join(filter(None, cdm.groups())), None
    kdm = _KDM.search(head)
    if kdm:
        return "KDiskMark", kdm.group(1), None
    raise IolabError("not a CrystalDiskMark or KDiskMark text export (no such header in its first lines)",
                     context=context)


def _bs_label(number: str, unit: str) -> str:
    return f"{number}{unit[0]}"


def _row(test, direction, bs, iodepth, numjobs, bw, iops, lat, line) -> dict:
    return {"test": test, "direction": direction, "bs": bs, "iodepth": iodepth, "numjobs": numjobs,
            "bw_mbps": float(bw), "iops": float(iops) if iops else math.nan,
            "latency_us": float(lat) if lat else math.nan, "line": line.strip()}


def _new_row(match, section: str, line: str) -> dict:
    kind, number, unit, q, t, bw, iops, lat = match.groups()
    prefix = "SEQ" if kind in ("SEQ", "Sequential") else "RND"
    test = f"{prefix}{_bs_label(number, unit)}-Q{int(q)}T{int(t)}"
    if section == "mix":
        test = "MIX-" + test
    return _row(test, section, int(number) * _UNITS[unit], int(q), int(t), bw, iops, lat, line)


def _v6_row(match, line: str) -> dict:
    kind, rw, number, unit, q, t, bw, iops = match.groups()
    prefix = "SEQ" if kind == "Sequential" else "RND"
    bs = int(number) * _UNITS[unit] if number else None
    test = f"{prefix}{_bs_label(number, unit) if number else ''}-Q{q or 1}T{int(t)}" if q else \
        f"{prefix}{_bs_label(number, unit) if number else ''}-T{int(t)}"
    return _row(test, rw.lower(), bs, int(q) if q else None, int(t), bw, iops, None, line)


def _v3_row(match, line: str) -> dict:
    kind, rw, kb, qd, bw, iops = match.groups()
    if kind == "Sequential":
        test = "Seq"
    elif kb and not qd:
        test = f"{kb}K"
    else:
        test = f"{kb}K" + (f"-QD{qd}" if qd and qd != "1" else "")
    return _row(test, rw.lower(), None, int(qd) if qd else None, None, bw, iops, None, line)


def parse(text: str, *, context: str = "text export") -> CdmText:
    """The rows and footer of a CrystalDiskMark/KDiskMark text export; an error names ``context``."""
    tool, version, source_run = _header(text, context)
    fio = _FIO.search(text)
    rows, footer, section, mix, layout = [], {}, None, None, None
    for line in text.splitlines():
        heading = _SECTION.match(line)
        if heading:
            section = heading.group(1).lower()
            if section == "mix":
                mix = heading.group(2).strip() or None
            continue
        found = _NEW.match(line)
        if found and section:
            rows.append(_new_row(found, section, line))
            layout = "7.x/8.x"
            continue
        found = _V6.match(line)
        if found and section is None:
            rows.append(_v6_row(found, line))
            layout = "5.x/6.x"
            continue
        found = _V3.match(line)
        if found and section is None:
            rows.append(_v3_row(found, line))
            layout = "3.x"
            continue
        field_ = _FOOTER.match(line)
        if field_ and rows:
            footer[field_.group(1)] = field_.group(2)
    if not rows:
        raise IolabError(f"{tool} text export without a result line", context=context,
                         hint="export the results with the tool's File > Save text / Copy")
    own = _IOLAB_STATISTIC.search(text) if tool == "iolab" else None
    return CdmText(tool=tool, version=version, layout=layout, rows=rows, footer=footer,
                   fio_version=fio.group(1) if fio else None, mix=mix, source_run=source_run,
                   own_statistic=own.group(1) if own else None)


# ---------------------------------------------------------------------------------------- writing

def _size_label(bs: int) -> tuple[str, str]:
    for unit in ("GiB", "MiB", "KiB"):
        if bs % _UNITS[unit] == 0:
            return str(bs // _UNITS[unit]), unit
    raise IolabError(f"block size {bs} has no KiB/MiB/GiB label", context="cdm-text export")


def result_line(*, random: bool, bs: int, iodepth: int, numjobs: int, bw_mbps: float, iops: float,
                lat_us: float | None) -> str:
    """One result line in the 7.x/8.x layout."""
    number, unit = _size_label(int(bs))
    name = f"  {'RND' if random else 'SEQ'} {number:>4}{unit} (Q={int(iodepth):>3}, T={int(numjobs):>2}):"
    lat = f" <{lat_us:>9.2f} us>" if lat_us is not None and not math.isnan(lat_us) else ""
    return f"{name} {bw_mbps:>9.3f} MB/s [{iops:>9.1f} IOPS]{lat}"


RULE = "-" * 78


def render(sections: dict[str, list[str]], *, iolab_version: str, fio_version: str | None, run_id: str,
           statistic: str, footer: dict, notes=()) -> str:
    """CrystalDiskMark 8's text layout: ``sections`` maps headings (``[Read]``, ``[Mix] Read 70%/Write 30%``)
    to result lines; ``notes`` are more ``* ...`` lines under the units (e.g. what the Mix figure is)."""
    lines = [RULE, f"iolab {iolab_version} ({fio_version or 'no fio'}): CrystalDiskMark 8 layout, run {run_id}",
             f"{'measured with fio by iolab; figures: ' + statistic + ' of the passes':>78}", RULE,
             "* MB/s = 1,000,000 bytes/s [SATA/600 = 600,000,000 bytes/s]",
             "* KB = 1000 bytes, KiB = 1024 bytes", *notes, ""]
    for heading, body in sections.items():
        if body:
            lines += [heading, *body, ""]
    width = max(len(k) for k in footer) if footer else 0
    lines += [f"{key:>{width}}: {value}" for key, value in footer.items() if value is not None]
    return "\n".join(lines) + "\n"
