# etwdump for Volatility 3: ETW sessions, trace buffers, .etl files and context switches of a
# Windows memory image, as `windows.etw.Sessions`, `windows.etw.Buffers`,
# `windows.etw.CSwitch` (timeliner rows from Sessions and CSwitch), `windows.etw.Providers`
# (registered providers) and `windows.etw.Check` (tamper checks).
#
#   vol -p plugins/volatility3 -f MEMORY windows.etw.Sessions [--dump]
#   vol -p plugins/volatility3 -f MEMORY windows.etw.Buffers [--session ID|NAME]
#   vol -p plugins/volatility3 -f MEMORY windows.etw.CSwitch [--cpu N] [--last 250ms]
#   vol -p plugins/volatility3 -f MEMORY windows.etw.Providers [--all]
#   vol -p plugins/volatility3 -f MEMORY windows.etw.Check
#   vol -p plugins/volatility3 -f MEMORY timeliner.Timeliner --plugin-filter windows.etw
#
# The decoding is etwdump's: each plugin runs the `etwdump` binary (--etwdump PATH, else
# $ETWDUMP, else `etwdump` on PATH) on the memory Volatility opened and reads its JSON
# contract (format_version 3). Volatility hands over what it found: the physical layout of
# its memory layer over the file (`etwdump --layout`), the kernel's page-table root and
# architecture, and the kernel's ISF. Why a binary and not a binding: plugins/README.md.
"""ETW sessions, buffers, context switches, providers and tamper checks of a Windows image,
decoded by etwdump."""

import datetime
import json
import logging
import os
import shutil
import subprocess
import tempfile
import unicodedata
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Optional, Tuple

from volatility3.framework import exceptions, interfaces, renderers
from volatility3.framework.configuration import requirements
from volatility3.framework.layers import intel, physical, segmented
from volatility3.framework.renderers import format_hints
from volatility3.plugins import timeliner

vollog = logging.getLogger(__name__)

# The JSON contract this plugin reads (etwdump's FORMAT_VERSION).
FORMAT_VERSION = 3
PAGE = 0x1000
# etwdump reads at most 2^16 ranges from a layout (src/dump/layout.rs).
MAX_RANGES = 1 << 16
# How much memory the copy hand-off writes at most (bytes) unless --copy-limit says otherwise.
DEFAULT_COPY_LIMIT = 64 << 30
CRASH_DUMP_SIGNATURES = (b"PAGEDU64", b"PAGEDUMP")
# A hibernation file (volatility3's HibernationLayer over it): etwdump decompresses it itself.
HIBERNATION_SIGNATURES = (b"HIBR", b"WAKE", b"RSTR")
EPOCH_1601 = datetime.datetime(1601, 1, 1, tzinfo=datetime.timezone.utc)


def printable(text: Optional[str]) -> Optional[str]:
    """Text from memory, safe for a terminal: each control character (Unicode category Cc)
    becomes `\\u{hex}`, exactly as etwdump's table escapes it."""
    if text is None:
        return None
    return "".join(
        "\\u{%x}" % ord(c) if unicodedata.category(c) == "Cc" else c for c in text
    )


def text_or_absent(text: Optional[str], absent=None):
    if text is None:
        return absent if absent is not None else renderers.UnreadableValue()
    return printable(text)


def int_or_absent(value: Optional[int], hex_: bool = False):
    if value is None:
        return renderers.NotAvailableValue()
    return format_hints.Hex(value) if hex_ else value


def filetime(raw: Optional[int]):
    """A FILETIME (100 ns since 1601, UTC) as a datetime, truncated to the microsecond."""
    if raw is None or raw <= 0:
        return renderers.NotAvailableValue()
    try:
        return EPOCH_1601 + datetime.timedelta(microseconds=raw // 10)
    except OverflowError:
        return renderers.UnparsableValue()


def iso_time(text: Optional[str]):
    """etwdump's RFC 3339 UTC time (7 fraction digits) as a datetime, truncated to the
    microsecond."""
    if not text:
        return renderers.NotAvailableValue()
    try:
        day, _, rest = text.rstrip("Z").partition("T")
        clock, _, frac = rest.partition(".")
        base = datetime.datetime.fromisoformat(f"{day}T{clock}").replace(
            tzinfo=datetime.timezone.utc
        )
        return base + datetime.timedelta(microseconds=int((frac + "000000")[:6]))
    except ValueError:
        return renderers.UnparsableValue()


class HandOffError(exceptions.VolatilityException):
    """The memory Volatility opened cannot be handed to etwdump."""


class EtwdumpError(exceptions.VolatilityException):
    """etwdump refused the memory or failed (the reason is logged as an error too: the CLI
    shows an unknown exception's text only with -vvv)."""

    def __init__(self, message: str):
        vollog.error(message)
        super().__init__(message)


class _Etwdump(interfaces.plugins.PluginInterface):
    """Shared by the plugins: hand the memory over to etwdump and run it."""

    _required_framework_version = (2, 0, 0)
    _version = (1, 0, 0)

    @classmethod
    def _common_requirements(cls) -> List[interfaces.configuration.RequirementInterface]:
        return [
            requirements.ModuleRequirement(
                name="kernel",
                description="Windows kernel",
                architectures=["Intel32", "Intel64"],
            ),
            requirements.StringRequirement(
                name="etwdump",
                description="Path of the etwdump binary (default: $ETWDUMP, then PATH)",
                optional=True,
            ),
            requirements.ChoiceRequirement(
                name="handoff",
                description="How etwdump reads the memory: auto (the file itself when "
                "etwdump knows its format or Volatility's layers place it linearly, else a "
                "copy), layout (never copy) or copy (always copy the physical memory to a "
                "temporary raw file)",
                choices=["auto", "layout", "copy"],
                default="auto",
                optional=True,
            ),
            requirements.IntRequirement(
                name="copy-limit",
                description="Most bytes of physical memory a copy hand-off writes",
                default=DEFAULT_COPY_LIMIT,
                optional=True,
            ),
        ]

    # ----------------------------------------------------------------------- hand-off
    def _binary(self) -> str:
        path = self.config.get("etwdump") or os.environ.get("ETWDUMP") or "etwdump"
        found = shutil.which(path) or (path if os.path.isfile(path) else None)
        if not found:
            raise EtwdumpError(
                f"the etwdump binary was not found ({path!r}): install it, put it on PATH, "
                "set $ETWDUMP or give --etwdump PATH"
            )
        return found

    def _kernel(self):
        return self.context.modules[self.config["kernel"]]

    def _machine(self) -> Tuple[str, int, str]:
        """(arch for the layout, DTB, memory layer name) of the kernel's virtual layer."""
        layer = self.context.layers[self._kernel().layer_name]
        dtb = int(layer.config["page_map_offset"])
        if isinstance(layer, intel.Intel32e):
            arch = "x64"
        elif isinstance(layer, intel.IntelPAE):
            arch = "x86-pae"
        else:
            arch = "x86"
        return arch, dtb, layer.config["memory_layer"]

    @staticmethod
    def _location_path(layer) -> Optional[str]:
        location = getattr(layer, "location", None) or layer.config.get("location")
        if not location:
            return None
        url = urllib.parse.urlparse(location)
        if url.scheme != "file":
            return None
        return urllib.request.url2pathname(url.path)

    def _file_ranges(self, layer_name: str, start: int, length: int, depth: int = 0):
        """(physical start, size, file layer name, file offset) pieces placing [start,
        start + length) of `layer_name` in one file, or HandOffError when a layer between
        them does not place its data linearly (compressed, or unknown)."""
        if depth > 8:
            raise HandOffError("more than 8 layers between memory and the file")
        layer = self.context.layers[layer_name]
        if isinstance(layer, physical.FileLayer):
            yield start, length, layer_name, start
            return
        linear = isinstance(layer, segmented.SegmentedLayer) or (
            isinstance(layer, interfaces.layers.TranslationLayerInterface)
            and not isinstance(layer, segmented.NonLinearlySegmentedLayer)
            and type(layer).__name__ in ("LinearlyMappedLayer",)
        )
        if not linear:
            raise HandOffError(
                f"layer {layer_name} ({type(layer).__name__}) does not place memory "
                "linearly in a file"
            )
        for offset, sublength, mapped, mapped_length, base in layer.mapping(
            start, length, ignore_errors=True
        ):
            if sublength != mapped_length:
                raise HandOffError(
                    f"layer {layer_name} ({type(layer).__name__}) maps {sublength:#x} "
                    f"bytes at {offset:#x} to {mapped_length:#x} bytes (compressed)"
                )
            for p_start, p_len, file_layer, f_off in self._file_ranges(
                base, mapped, mapped_length, depth + 1
            ):
                yield offset + (p_start - mapped), p_len, file_layer, f_off

    def _layout_ranges(self, memory_layer: str) -> Tuple[str, List[Dict[str, int]], str]:
        layer = self.context.layers[memory_layer]
        pieces = list(self._file_ranges(memory_layer, 0, layer.maximum_address + 1))
        files = {p[2] for p in pieces}
        if len(files) != 1:
            raise HandOffError(f"memory lies in {len(files)} files")
        file_layer = self.context.layers[files.pop()]
        path = self._location_path(file_layer)
        if path is None:
            raise HandOffError("the memory file is not a local file")
        ranges: List[Dict[str, int]] = []
        for p_start, p_len, _f, f_off in sorted(pieces):
            # Whole pages only: a partial page at either end is left out (and said).
            head = (-p_start) % PAGE
            size = (p_len - head) // PAGE * PAGE
            if size <= 0:
                continue
            start, f_off = p_start + head, f_off + head
            last = ranges[-1] if ranges else None
            if (
                last
                and last["start"] + last["size"] == start
                and last["file_offset"] + last["size"] == f_off
            ):
                last["size"] += size
            else:
                ranges.append({"start": start, "size": size, "file_offset": f_off})
        if len(ranges) > MAX_RANGES:
            raise HandOffError(f"{len(ranges)} ranges (etwdump reads at most {MAX_RANGES})")
        chain = []
        name = memory_layer
        while name:
            lyr = self.context.layers[name]
            chain.append(type(lyr).__name__)
            name = lyr.config.get("base_layer") if hasattr(lyr, "config") else None
        return path, ranges, " over ".join(chain)

    def _copy(self, memory_layer: str, workdir: str) -> Tuple[str, List[Dict[str, int]]]:
        """Copy the physical memory Volatility can read into a sparse raw file."""
        layer = self.context.layers[memory_layer]
        limit = int(self.config.get("copy-limit", DEFAULT_COPY_LIMIT))
        path = os.path.join(workdir, "memory.raw")
        ranges: List[Dict[str, int]] = []
        written = 0
        with open(path, "wb") as out:
            for offset, sublength, _m, _ml, _l in layer.mapping(
                0, layer.maximum_address + 1, ignore_errors=True
            ):
                start = offset // PAGE * PAGE
                end = -(-(offset + sublength) // PAGE) * PAGE
                if ranges and ranges[-1]["start"] + ranges[-1]["size"] >= start:
                    prev = ranges[-1]
                    start = prev["start"] + prev["size"]
                    if end <= start:
                        continue
                    prev["size"] = end - prev["start"]
                else:
                    ranges.append({"start": start, "size": end - start, "file_offset": start})
                written += end - start
                if written > limit:
                    raise EtwdumpError(
                        f"copying the physical memory would write more than {limit} bytes "
                        "(--copy-limit)"
                    )
                at = start
                while at < end:
                    n = min(end - at, 1 << 20)
                    out.seek(at)
                    out.write(layer.read(at, n, pad=True))
                    at += n
        if len(ranges) > MAX_RANGES:
            raise EtwdumpError(f"{len(ranges)} ranges (etwdump reads at most {MAX_RANGES})")
        return path, ranges

    def _isf(self, workdir: str) -> Optional[str]:
        """The kernel's ISF as a local .json file, or None."""
        table = self.context.symbol_space[self._kernel().symbol_table_name]
        url = table.config.get("isf_url")
        if not url:
            return None
        from volatility3.framework.layers import resources

        path = os.path.join(workdir, "kernel.json")
        try:
            with resources.ResourceAccessor().open(url) as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
        except Exception as e:  # the ISF stays Volatility's business; etwdump can go without
            vollog.warning(f"the kernel's ISF ({url}) could not be copied for etwdump: {e}")
            return None
        return path

    def _bottom_file(self, layer_name: str) -> Optional[str]:
        """The local file at the bottom of `layer_name`'s chain of base layers, if any."""
        name, depth = layer_name, 0
        while name and depth <= 8:
            layer = self.context.layers[name]
            if isinstance(layer, physical.FileLayer):
                return self._location_path(layer)
            name = layer.config.get("base_layer")
            depth += 1
        return None

    def _handoff(self, workdir: str) -> List[str]:
        """etwdump's arguments for the memory: FILE [--layout L] [--isf I]."""
        arch, dtb, memory_layer = self._machine()
        mode = self.config.get("handoff") or "auto"
        args: List[str] = []
        ranges: Optional[List[Dict[str, int]]] = None
        source = ""
        # A crash dump is given as it is (etwdump reads its header, runs, bitmap and triage
        # blocks itself), before any segment list is built: a fragmented bitmap dump can have
        # more runs than a layout may hold. So is a hibernation file: its compressed sets
        # cannot be placed by a layout, and etwdump reads both restore sets itself.
        bottom = self._bottom_file(memory_layer) if mode == "auto" else None
        if bottom is not None:
            with open(bottom, "rb") as f:
                head = f.read(8)
                if head in CRASH_DUMP_SIGNATURES:
                    args = [bottom]
                    source = f"{bottom} (a crash dump, read by etwdump itself)"
                elif head[:4].upper() in HIBERNATION_SIGNATURES:
                    args = [bottom]
                    source = f"{bottom} (a hibernation file, read by etwdump itself)"
        if not args and mode != "copy":
            try:
                path, ranges, chain = self._layout_ranges(memory_layer)
                args = [path]
                source = f"volatility3: {chain} ({len(ranges)} ranges)"
            except HandOffError as e:
                if mode == "layout":
                    raise EtwdumpError(f"the memory cannot be handed over as a layout: {e}")
                vollog.warning(f"copying the physical memory for etwdump: {e}")
        if not args:
            path, ranges = self._copy(memory_layer, workdir)
            args = [path]
            source = f"volatility3: a copy of {memory_layer} ({len(ranges)} ranges)"
        if ranges is not None:
            layout = {
                "etwdump_layout": 1,
                "source": source,
                "ranges": ranges,
                "arch": arch,
                "dtb": dtb,
            }
            lpath = os.path.join(workdir, "layout.json")
            with open(lpath, "w") as f:
                json.dump(layout, f)
            args += ["--layout", lpath]
        vollog.info(f"etwdump reads {source}")
        isf = self._isf(workdir)
        if isf:
            args += ["--isf", isf]
        return args

    def _run(
        self, command: str, extra: List[str], workdir: str, json_out: bool = True
    ) -> Dict[str, Any]:
        """`etwdump COMMAND MEMORY ...`: its JSON output (with `json_out`), its warnings
        logged (escaped)."""
        argv = [self._binary(), command] + self._handoff(workdir) + extra
        vollog.debug("running " + " ".join(argv))
        proc = subprocess.run(argv, capture_output=True)
        stderr = proc.stderr.decode("utf-8", "replace")
        for line in stderr.splitlines():
            if line.strip():
                vollog.warning("etwdump: " + printable(line))
        if proc.returncode != 0:
            raise EtwdumpError(
                f"etwdump {command} failed (exit {proc.returncode}): "
                + printable(stderr.strip().splitlines()[-1] if stderr.strip() else "")
            )
        if not json_out:
            return {}
        try:
            doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except ValueError as e:
            raise EtwdumpError(f"etwdump {command}: output is not JSON: {e}")
        if doc and doc.get("format_version") != FORMAT_VERSION:
            raise EtwdumpError(
                f"etwdump {command}: format_version {doc.get('format_version')} "
                f"(this plugin reads {FORMAT_VERSION}): use matching versions"
            )
        return doc

    def _records(self, command: str, extra: List[str]) -> List[Dict[str, Any]]:
        with tempfile.TemporaryDirectory(prefix="vol-etwdump-") as workdir:
            doc = self._run(command, extra + ["--format", "json"], workdir)
        return [r for r in doc.get("records", []) if isinstance(r, dict)]


class Sessions(_Etwdump, timeliner.TimeLinerInterface):
    """Lists the ETW sessions (WMI_LOGGER_CONTEXTs) with every field etwdump reads, and
    optionally writes each session's in-memory buffers as an .etl file (--dump)."""

    _version = (1, 0, 0)

    @classmethod
    def get_requirements(cls):
        return cls._common_requirements() + [
            requirements.BooleanRequirement(
                name="dump",
                description="Write each session's in-memory buffers as an .etl file",
                default=False,
                optional=True,
            ),
        ]

    COLUMNS = [
        ("LoggerId", int),
        ("Name", str),
        ("LogFile", str),
        ("Address", format_hints.Hex),
        ("LoggerMode", format_hints.Hex),
        ("ModeFlags", str),
        ("ClockType", int),
        ("Clock", str),
        ("BufferSize", format_hints.Hex),
        ("MinimumBuffers", int),
        ("MaximumBuffers", int),
        ("NumberOfBuffers", int),
        ("BuffersWritten", int),
        ("EventsLost", int),
        ("LogBuffersLost", int),
        ("RealTimeBuffersLost", int),
        ("StartTime", datetime.datetime),
        ("StartTimeRaw", int),
        ("InstanceGuid", str),
        ("PoolType", int),
        ("MaximumEventSize", int),
        ("LayoutSource", str),
        ("Identity", str),
        ("Anomalies", str),
        ("Warnings", str),
        ("Consumers", str),
        ("File output", str),
    ]

    def _extract(self) -> Dict[int, str]:
        """Run `etwdump extract` and copy each .etl and manifest.json out through
        Volatility's file handler; the output name per logger id."""
        out: Dict[int, str] = {}
        with tempfile.TemporaryDirectory(prefix="vol-etwdump-") as workdir:
            etl_dir = os.path.join(workdir, "etl")
            self._run("extract", ["-o", etl_dir], workdir, json_out=False)
            manifest_path = os.path.join(etl_dir, "manifest.json")
            if not os.path.isfile(manifest_path):
                return out
            with open(manifest_path, "rb") as f:
                manifest_bytes = f.read()
            manifest = json.loads(manifest_bytes)
            for entry in manifest.get("sessions", []):
                name = entry.get("file")
                lid = entry.get("logger_id")
                if not isinstance(name, str) or os.path.basename(name) != name:
                    continue
                src = os.path.join(etl_dir, name)
                if not os.path.isfile(src):
                    continue
                with self.open(name) as dst, open(src, "rb") as f:
                    shutil.copyfileobj(f, dst)
                    out[lid] = dst.preferred_filename
            with self.open("manifest.json") as dst:
                dst.write(manifest_bytes)
        return out

    def _generator(self) -> Iterator[Tuple[int, tuple]]:
        files = self._extract() if self.config.get("dump") else {}
        for r in self._records("sessions", []):
            if r.get("kind") != "session":
                continue
            lid = r.get("logger_id")
            yield 0, (
                int_or_absent(lid),
                text_or_absent(r.get("name")),
                text_or_absent(r.get("log_file"), renderers.NotApplicableValue()),
                int_or_absent(_addr(r.get("address")), hex_=True),
                int_or_absent(r.get("logger_mode"), hex_=True),
                printable(", ".join(r.get("logger_mode_flags") or [])),
                int_or_absent(r.get("clock_type")),
                text_or_absent(r.get("clock_type_name"), renderers.NotAvailableValue()),
                int_or_absent(r.get("buffer_size"), hex_=True),
                int_or_absent(r.get("minimum_buffers")),
                int_or_absent(r.get("maximum_buffers")),
                int_or_absent(r.get("number_of_buffers")),
                int_or_absent(r.get("buffers_written")),
                int_or_absent(r.get("events_lost")),
                int_or_absent(r.get("log_buffers_lost")),
                int_or_absent(r.get("real_time_buffers_lost")),
                filetime(r.get("start_time_raw")),
                int_or_absent(r.get("start_time_raw")),
                text_or_absent(r.get("instance_guid"), renderers.NotAvailableValue()),
                int_or_absent(r.get("pool_type")),
                int_or_absent(r.get("maximum_event_size")),
                text_or_absent(r.get("layout_source"), renderers.NotAvailableValue()),
                printable(", ".join(map(str, r.get("identity") or []))),
                printable("; ".join(map(_warning_text, r.get("anomalies") or []))),
                printable("; ".join(map(_warning_text, r.get("warnings") or []))),
                printable("; ".join(_consumer_text(c) for c in r.get("consumers") or [] if isinstance(c, dict))),
                files.get(lid, renderers.NotApplicableValue()),
            )

    def generate_timeline(self):
        for _depth, row in self._generator():
            if isinstance(row[16], datetime.datetime):
                name = row[1] if isinstance(row[1], str) else "(unreadable)"
                yield (
                    f"ETW session started: logger {row[0]} {name}",
                    timeliner.TimeLinerType.CREATED,
                    row[16],
                )

    def run(self):
        return renderers.TreeGrid(self.COLUMNS, self._generator())


class Buffers(_Etwdump):
    """Lists every trace buffer the ETW sessions still hold in memory (etwdump buffers)."""

    _version = (1, 0, 0)

    @classmethod
    def get_requirements(cls):
        return cls._common_requirements() + [
            requirements.StringRequirement(
                name="session",
                description="Only this session (logger id or name)",
                optional=True,
            ),
        ]

    COLUMNS = [
        ("LoggerId", int),
        ("Session", str),
        ("Source", str),
        ("Address", format_hints.Hex),
        ("FileOffset", format_hints.Hex),
        ("Lists", str),
        ("State", int),
        ("StateName", str),
        ("BufferType", int),
        ("BufferFlag", format_hints.Hex),
        ("Processor", int),
        ("SequenceNumber", int),
        ("BufferSize", format_hints.Hex),
        ("ValidBytes", format_hints.Hex),
        ("SavedBytes", format_hints.Hex),
        ("PartialBytes", format_hints.Hex),
        ("TrimmedBytes", format_hints.Hex),
        ("Records", int),
        ("RecordsByHook", str),
        ("Compressed", bool),
        ("DuplicateOf", format_hints.Hex),
        ("ConsumerPid", int),
        ("ConsumerProcess", str),
        ("FoundVia", str),
        ("Warnings", str),
    ]

    def _generator(self):
        extra = []
        if self.config.get("session"):
            extra = ["--session", self.config["session"]]
        na = renderers.NotApplicableValue
        for r in self._records("buffers", extra):
            hooks = r.get("records_by_hook") or {}
            yield 0, (
                int_or_absent(r.get("session_id")),
                text_or_absent(r.get("session_name")),
                text_or_absent(r.get("source"), renderers.NotAvailableValue()),
                int_or_absent(_addr(r.get("address")), hex_=True),
                int_or_absent(r.get("file_offset"), hex_=True),
                printable(", ".join(map(str, r.get("lists") or []))),
                int_or_absent(r.get("state")),
                text_or_absent(r.get("state_name"), renderers.NotAvailableValue()),
                int_or_absent(r.get("buffer_type")),
                int_or_absent(r.get("buffer_flag"), hex_=True),
                int_or_absent(r.get("processor")),
                int_or_absent(r.get("sequence_number")),
                int_or_absent(r.get("buffer_size"), hex_=True),
                int_or_absent(r.get("valid_bytes"), hex_=True),
                int_or_absent(r.get("saved_bytes"), hex_=True),
                int_or_absent(r.get("partial_bytes"), hex_=True),
                int_or_absent(r.get("trimmed_bytes"), hex_=True),
                int_or_absent(r.get("record_count")),
                printable(", ".join(f"{k}: {v}" for k, v in sorted(hooks.items()))),
                bool(r.get("compressed")),
                na() if r.get("duplicate_of") is None else int_or_absent(_addr(r.get("duplicate_of")), hex_=True),
                na() if r.get("consumer_pid") is None else int_or_absent(r.get("consumer_pid")),
                text_or_absent(r.get("consumer_process"), na()),
                text_or_absent(r.get("found_via"), na()),
                printable("; ".join(map(_warning_text, r.get("warnings") or []))),
            )

    def run(self):
        return renderers.TreeGrid(self.COLUMNS, self._generator())


class CSwitch(_Etwdump, timeliner.TimeLinerInterface):
    """Context switches per CPU in UTC order: the pending (never flushed) CCSWAP batches and
    the 0x0525 batches and 0x0524 events of the recovered buffers, with UTC times and process
    names. One row per switch: a switch traced by several sessions lists every record in
    Sources (--per-record: one row per record)."""

    _version = (1, 1, 0)

    @classmethod
    def get_requirements(cls):
        return cls._common_requirements() + [
            requirements.IntRequirement(
                name="cpu", description="Only this CPU", optional=True
            ),
            requirements.StringRequirement(
                name="last",
                description="Only the last DURATION before the dump (e.g. 250ms, 2s)",
                optional=True,
            ),
            requirements.ListRequirement(
                name="pid",
                element_type=int,
                description="Only switches from or to threads of these processes",
                optional=True,
            ),
            requirements.ListRequirement(
                name="tid",
                element_type=int,
                description="Only switches from or to these threads",
                optional=True,
            ),
            requirements.StringRequirement(
                name="since", description="Only at or after this UTC time", optional=True
            ),
            requirements.StringRequirement(
                name="until", description="Only at or before this UTC time", optional=True
            ),
            requirements.BooleanRequirement(
                name="per_record",
                description="One row per record (a switch traced by two sessions is two rows)",
                default=False,
                optional=True,
            ),
        ]

    COLUMNS = [
        ("Cpu", int),
        ("Time", datetime.datetime),
        ("RawTimestamp", int),
        ("TimeFlag", str),
        ("OldTid", int),
        ("OldProcess", str),
        ("OldPid", int),
        ("NewTid", int),
        ("NewProcess", str),
        ("NewPid", int),
        ("OldPriority", int),
        ("NewPriority", int),
        ("OldState", str),
        ("OldWaitReason", str),
        ("OldWaitMode", str),
        ("NewThreadWaitTime", int),
        ("Source", str),
        ("LoggerId", int),
        ("ClockSlot", int),
        ("FoundBy", str),
        ("Sources", str),
    ]

    def _generator(self):
        extra = []
        if self.config.get("cpu") is not None:
            extra += ["--cpu", str(self.config["cpu"])]
        if self.config.get("last"):
            extra += ["--last", self.config["last"]]
        if self.config.get("per_record"):
            extra += ["--per-record"]
        for name in ("pid", "tid"):
            for v in self.config.get(name) or []:
                extra += ["--" + name, str(v)]
        for name in ("since", "until"):
            if self.config.get(name):
                extra += ["--" + name, self.config[name]]
        na = renderers.NotAvailableValue
        for r in self._records("cswitch", extra):
            yield 0, (
                int_or_absent(r.get("cpu")),
                iso_time(r.get("time")),
                int_or_absent(r.get("raw_timestamp")),
                text_or_absent(r.get("time_flag"), renderers.NotApplicableValue()),
                int_or_absent(r.get("old_tid")),
                text_or_absent(r.get("old_process"), na()),
                int_or_absent(r.get("old_pid")),
                int_or_absent(r.get("new_tid")),
                text_or_absent(r.get("new_process"), na()),
                int_or_absent(r.get("new_pid")),
                int_or_absent(r.get("old_priority")),
                int_or_absent(r.get("new_priority")),
                text_or_absent(r.get("old_state"), na()),
                text_or_absent(r.get("old_wait_reason"), na()),
                text_or_absent(r.get("old_wait_mode"), na()),
                int_or_absent(r.get("new_thread_wait_time")),
                text_or_absent(r.get("source"), na()),
                int_or_absent(r.get("logger_id")),
                int_or_absent(r.get("clock")),
                _found_by(r.get("found_by")),
                _sources(r.get("sources")),
            )

    def generate_timeline(self):
        for _depth, row in self._generator():
            if isinstance(row[1], datetime.datetime):
                old = row[5] if isinstance(row[5], str) else "?"
                new = row[8] if isinstance(row[8], str) else "?"
                old_tid = row[4] if isinstance(row[4], int) else "?"
                new_tid = row[7] if isinstance(row[7], int) else "?"
                # The raw timestamp makes each description unique: Timeliner keys its
                # rows by (plugin, description) and would merge equal ones.
                yield (
                    f"ETW context switch, CPU {row[0]}, raw {row[2]}: {old} (TID {old_tid}) "
                    f"-> {new} (TID {new_tid}) [{row[16]}]",
                    timeliner.TimeLinerType.CHANGED,
                    row[1],
                )

    def run(self):
        return renderers.TreeGrid(self.COLUMNS, self._generator())



class Events(_Etwdump, timeliner.TimeLinerInterface):
    """One row per ETW record of the recovered buffers (header fields, UTC time, CPU, PID,
    TID, the interrupt/DPC routine), filtered by etwdump as it streams: a record whose value
    a filter needs is unknown (no PID, no UTC time) is left out and counted in a warning."""

    _version = (1, 0, 0)

    @classmethod
    def get_requirements(cls):
        return cls._common_requirements() + [
            requirements.ListRequirement(
                name="pid", element_type=int, description="Only these process ids", optional=True
            ),
            requirements.ListRequirement(
                name="tid", element_type=int, description="Only these thread ids", optional=True
            ),
            requirements.ListRequirement(
                name="provider",
                element_type=str,
                description="Only these providers (GUID or a name etwdump's providers shows)",
                optional=True,
            ),
            requirements.ListRequirement(
                name="event_id", element_type=int, description="Only these event ids", optional=True
            ),
            requirements.ListRequirement(
                name="hook",
                element_type=str,
                description="Only these kernel hooks (0x0524 or CONTEXTSWAP)",
                optional=True,
            ),
            requirements.StringRequirement(
                name="since", description="Only at or after this UTC time", optional=True
            ),
            requirements.StringRequirement(
                name="until", description="Only at or before this UTC time", optional=True
            ),
            requirements.StringRequirement(
                name="last",
                description="Only the last DURATION before the dump (e.g. 250ms, 2s)",
                optional=True,
            ),
        ]

    COLUMNS = [
        ("LoggerId", int),
        ("Source", str),
        ("Buffer", format_hints.Hex),
        ("Offset", int),
        ("HeaderType", str),
        ("Hook", str),
        ("HookName", str),
        ("Provider", str),
        ("ProviderName", str),
        ("EventId", int),
        ("Version", int),
        ("Time", datetime.datetime),
        ("RawTimestamp", int),
        ("TimeFlag", str),
        ("Cpu", int),
        ("Pid", int),
        ("Tid", int),
        ("Size", int),
        ("Routine", str),
    ]

    def _generator(self):
        extra = []
        for name in ("pid", "tid", "provider", "event_id", "hook"):
            for v in self.config.get(name) or []:
                extra += ["--" + name.replace("_", "-"), str(v)]
        for name in ("since", "until", "last"):
            if self.config.get(name):
                extra += ["--" + name, self.config[name]]
        na = renderers.NotAvailableValue
        napp = renderers.NotApplicableValue
        for r in self._records("events", extra):
            routine = r.get("routine_symbol") or r.get("routine")
            yield 0, (
                int_or_absent(r.get("logger_id")),
                text_or_absent(r.get("source"), na()),
                int_or_absent(_addr(r.get("buffer")), hex_=True),
                int_or_absent(r.get("offset")),
                text_or_absent(r.get("header_type"), na()),
                text_or_absent(r.get("hook"), napp()),
                text_or_absent(r.get("hook_name"), napp()),
                text_or_absent(r.get("provider"), napp()),
                text_or_absent(r.get("provider_name"), na()),
                int_or_absent(r.get("event_id")),
                int_or_absent(r.get("version")),
                iso_time(r.get("time")),
                int_or_absent(r.get("raw_timestamp")),
                text_or_absent(r.get("time_flag"), napp()),
                int_or_absent(r.get("cpu")),
                int_or_absent(r.get("pid")),
                int_or_absent(r.get("tid")),
                int_or_absent(r.get("size")),
                text_or_absent(routine, napp()),
            )

    def generate_timeline(self):
        for _depth, row in self._generator():
            if isinstance(row[11], datetime.datetime):
                name = row[8] + " " if isinstance(row[8], str) else ""
                what = row[6] if isinstance(row[6], str) else (
                    "provider %s%s event %s" % (name, row[7], row[9]) if isinstance(row[7], str) else row[4])
                # Buffer and offset make each description unique (Timeliner keys rows by it).
                yield (
                    f"ETW record {what}, logger {row[0]}, buffer {row[2]} +{row[3]}",
                    timeliner.TimeLinerType.CREATED,
                    row[11],
                )

    def run(self):
        return renderers.TreeGrid(self.COLUMNS, self._generator())


class Providers(_Etwdump):
    """Lists the registered ETW providers from the kernel's GUID table (etwdump providers):
    one row per registration, with the sessions enabling each provider."""

    _version = (1, 0, 0)

    @classmethod
    def get_requirements(cls):
        return cls._common_requirements() + [
            requirements.BooleanRequirement(
                name="all",
                description="Also the providers no session enables",
                default=False,
                optional=True,
            ),
        ]

    COLUMNS = [
        ("GUID", str),
        ("Name", str),
        ("GuidEntry", format_hints.Hex),
        ("GuidType", str),
        ("Registration", format_hints.Hex),
        ("Kind", str),
        ("PID", int),
        ("Process", str),
        ("EPROCESS", format_hints.Hex),
        ("Callback", format_hints.Hex),
        ("EnableMask", format_hints.Hex),
        ("EnabledBy", str),
        ("Warnings", str),
    ]

    def _generator(self):
        extra = ["--all"] if self.config.get("all") else []
        na = renderers.NotApplicableValue
        for r in self._records("providers", extra):
            enabled = "; ".join(
                "%s %s L%s any %s all %s"
                % (
                    e.get("logger_id"),
                    printable(e.get("session")) if e.get("session") is not None else "(no such session)",
                    e.get("level"),
                    e.get("match_any_keyword"),
                    e.get("match_all_keyword"),
                )
                for e in (r.get("enabled_by") or [])
                if isinstance(e, dict)
            )
            reg = r.get("registration")
            yield 0, (
                text_or_absent(r.get("guid")),
                text_or_absent(r.get("name"), na()),
                int_or_absent(_addr(r.get("guid_entry")), hex_=True),
                text_or_absent(r.get("guid_type"), na()),
                na() if reg is None else int_or_absent(_addr(reg), hex_=True),
                text_or_absent(r.get("kind"), na()),
                int_or_absent(r.get("pid")) if r.get("kind") == "user" else na(),
                text_or_absent(r.get("process"), na()),
                na() if r.get("eprocess") is None else int_or_absent(_addr(r.get("eprocess")), hex_=True),
                na() if r.get("callback") is None else int_or_absent(_addr(r.get("callback")), hex_=True),
                na() if r.get("enable_mask") is None else int_or_absent(_addr(r.get("enable_mask")), hex_=True),
                enabled,
                printable("; ".join(map(_warning_text, r.get("warnings") or []))),
            )

    def run(self):
        return renderers.TreeGrid(self.COLUMNS, self._generator())


class Check(_Etwdump):
    """ETW tamper checks (etwdump check): the kernel's provider handles, provider enable
    state, sessions' GetCpuClock and consumers against what a clean kernel holds."""

    _version = (1, 0, 0)

    @classmethod
    def get_requirements(cls):
        return cls._common_requirements()

    COLUMNS = [
        ("Check", str),
        ("Severity", str),
        ("Subject", str),
        ("Address", format_hints.Hex),
        ("Field", str),
        ("LoggerId", int),
        ("Evidence", str),
        ("Expected", str),
    ]

    def _generator(self):
        na = renderers.NotApplicableValue
        for r in self._records("check", []):
            yield 0, (
                text_or_absent(r.get("check")),
                text_or_absent(r.get("severity")),
                text_or_absent(r.get("subject")),
                na() if r.get("address") is None else int_or_absent(_addr(r.get("address")), hex_=True),
                text_or_absent(r.get("field"), na()),
                na() if r.get("logger_id") is None else int_or_absent(r.get("logger_id")),
                text_or_absent(r.get("evidence")),
                text_or_absent(r.get("expected")),
            )

    def run(self):
        return renderers.TreeGrid(self.COLUMNS, self._generator())

def _addr(value) -> Optional[int]:
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 16) if value.lower().startswith("0x") else int(value)
        except ValueError:
            return None
    return None


def _consumer_text(c: Dict[str, Any]) -> str:
    """A real-time consumer as etwdump's table and CSV write it."""
    pid = c.get("pid")
    return "PID %s %s (consumer %s, EPROCESS %s)" % (
        "?" if pid is None else pid,
        c.get("process") if c.get("process") is not None else "(unreadable)",
        c.get("address"),
        c.get("eprocess") if c.get("eprocess") is not None else "?",
    )


def _found_by(f):
    """How a pending block was found (etwdump's found_by: method and offset in EtwSupport)."""
    if not isinstance(f, dict):
        return renderers.NotApplicableValue()
    method = printable(str(f.get("method")))
    offset = f.get("offset")
    return f"{method} at EtwSupport+{offset:#x}" if isinstance(offset, int) else method


def _source_text(s) -> str:
    """One record of a switch (etwdump's sources entry): `event logger 2 0xffff...+0xf0 raw
    4197230 clock 1`, `batch logger 0 0xffff...+0x48 #3 raw ... clock 3`, `pending block
    0xffff... #6 raw ... clock 1`."""
    if not isinstance(s, dict):
        return "?"
    parts = [printable(str(s.get("source")))]
    if s.get("logger_id") is not None:
        parts.append(f"logger {s['logger_id']}")
    if s.get("block") is not None:
        parts.append(f"block {printable(str(s['block']))}")
    if s.get("buffer") is not None:
        offset = s.get("offset")
        where = printable(str(s["buffer"]))
        parts.append(f"{where}+{offset:#x}" if isinstance(offset, int) else where)
    if s.get("index") is not None:
        parts.append(f"#{s['index']}")
    parts.append(f"raw {s.get('raw_timestamp')}")
    if s.get("clock") is not None:
        parts.append(f"clock {s['clock']}")
    return " ".join(parts)


def _sources(v):
    """Every record of a switch (etwdump's `sources`), "; "-separated."""
    if not isinstance(v, list) or not v:
        return renderers.NotAvailableValue()
    return "; ".join(_source_text(s) for s in v)


def _warning_text(w) -> str:
    if isinstance(w, dict):
        return str(w.get("message") or w.get("text") or json.dumps(w, sort_keys=True))
    return str(w)
