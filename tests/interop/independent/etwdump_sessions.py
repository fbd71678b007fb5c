# etwdump: a Volatility 3 plugin that lists the ETW sessions (loggers) of a Windows kernel
# memory image, independently of etwdump's own reader. See README.md next to this file.
#
#   vol -p plugins/volatility3 -f MEMORY.DMP etwdump_sessions.EtwSessions
#
# Only the framework's stable plugin API is used: a ModuleRequirement for the kernel (no
# dependency on another plugin's version, the way JPCERT's etw-scan broke), the kernel's
# symbol table (ISF from the PDB) for every layout, and the kernel's virtual layer for reads.
"""List ETW logger sessions from the kernel's logger-context array."""

import logging
import struct
from typing import Iterator, List, Optional, Tuple

from volatility3.framework import exceptions, interfaces, renderers
from volatility3.framework.configuration import requirements
from volatility3.framework.renderers import format_hints

vollog = logging.getLogger(__name__)

# Capacity of the inline / global arrays (MAXLOGGERS) and the default MaxLoggers.
MAXLOGGERS = 64
# EtwMaxLoggers is limited to 32..256 by the kernel; anything outside is not a MaxLoggers.
MAX_LOGGERS_LIMIT = 256


class EtwSessions(interfaces.plugins.PluginInterface):
    """Lists the ETW sessions (WMI_LOGGER_CONTEXTs) active in the image.

    The logger array is found the way the kernel keeps it:
      * 1709+: EtwpHostSiloState (or PspHostSiloGlobals.EtwSiloState) ->
        _ETW_SILODRIVERSTATE.EtwpLoggerContext, a pointer to MaxLoggers pointers;
      * 1511-1703: the same silo state's inline WmipLoggerContext[64];
      * 5.1-6.3 and 1507: the global WmipLoggerContext[64];
      * otherwise EtwpDebuggerData + 0x10 (a pointer to the array, 64 slots).
    Free slots (NULL, bit 0 set) and 5.x in-transition slots (a pointer back to the array) are
    skipped. A candidate is listed only if it is a readable, aligned kernel pointer to a
    _WMI_LOGGER_CONTEXT whose LoggerId equals the slot index, whose LoggerName is a plausible
    UNICODE_STRING and (1607+) whose SiloState is the silo state the array came from. A
    LoggerName whose characters are not in the image is shown as unreadable.
    """

    _required_framework_version = (2, 0, 0)
    _version = (1, 0, 0)

    @classmethod
    def get_requirements(cls) -> List[interfaces.configuration.RequirementInterface]:
        return [
            requirements.ModuleRequirement(
                name="kernel",
                description="Windows kernel",
                architectures=["Intel32", "Intel64"],
            ),
        ]

    # ------------------------------------------------------------------------- helpers
    def _kernel(self):
        return self.context.modules[self.config["kernel"]]

    def _read_ptr(self, layer, ptr_size: int, va: int) -> int:
        data = layer.read(va, ptr_size)
        return struct.unpack("<Q" if ptr_size == 8 else "<I", data)[0]

    @staticmethod
    def _canonical(va: int, ptr_size: int) -> int:
        """x64 addresses in canonical form (volatility's pointer objects drop bits 48-63)."""
        if ptr_size != 8:
            return va & 0xFFFFFFFF
        va &= (1 << 48) - 1
        return va | 0xFFFF000000000000 if va & (1 << 47) else va

    @staticmethod
    def _is_kernel_va(va: int, ptr_size: int) -> bool:
        if ptr_size == 8:
            return va >= 0xFFFF800000000000
        return 0x80000000 <= va <= 0xFFFFFFFF

    def _symbol_va(self, kernel, name: str) -> Optional[int]:
        if not kernel.has_symbol(name):
            return None
        return kernel.offset + kernel.get_symbol(name).address

    def _find_array(self, kernel, layer, ptr_size: int) -> Tuple[Optional[int], int, Optional[int], str]:
        """(array VA, capacity, silo state VA or None, route description)."""
        silo_type = kernel.symbol_table_name + "!_ETW_SILODRIVERSTATE"
        silo = None
        route = None
        host = self._symbol_va(kernel, "EtwpHostSiloState")
        if host is not None:
            try:
                silo = self._read_ptr(layer, ptr_size, host)
                route = "EtwpHostSiloState"
            except exceptions.InvalidAddressException:
                vollog.warning("EtwpHostSiloState at %#x is unreadable", host)
        if not silo:
            globals_va = self._symbol_va(kernel, "PspHostSiloGlobals")
            if globals_va is not None and kernel.has_type("_ESERVERSILO_GLOBALS"):
                gtype = kernel.get_type("_ESERVERSILO_GLOBALS")
                if gtype.has_member("EtwSiloState"):
                    off = gtype.relative_child_offset("EtwSiloState")
                    try:
                        silo = self._read_ptr(layer, ptr_size, globals_va + off)
                        route = "PspHostSiloGlobals.EtwSiloState"
                    except exceptions.InvalidAddressException:
                        vollog.warning("PspHostSiloGlobals at %#x is unreadable", globals_va)
        if silo and kernel.has_type("_ETW_SILODRIVERSTATE"):
            st = self.context.symbol_space.get_type(silo_type)
            if st.has_member("EtwpLoggerContext"):
                state = kernel.object("_ETW_SILODRIVERSTATE", offset=silo, absolute=True)
                array = self._canonical(int(state.EtwpLoggerContext), ptr_size)
                capacity = MAXLOGGERS
                if st.has_member("MaxLoggers"):
                    capacity = int(state.MaxLoggers)
                    if not 1 <= capacity <= MAX_LOGGERS_LIMIT:
                        vollog.warning("MaxLoggers %d is implausible; using %d", capacity, MAXLOGGERS)
                        capacity = MAXLOGGERS
                return array, capacity, silo, route + " -> _ETW_SILODRIVERSTATE.EtwpLoggerContext"
            if st.has_member("WmipLoggerContext"):
                state = kernel.object("_ETW_SILODRIVERSTATE", offset=silo, absolute=True)
                member = state.WmipLoggerContext
                return (silo + st.relative_child_offset("WmipLoggerContext"), int(member.vol.count),
                        silo, route + " -> _ETW_SILODRIVERSTATE.WmipLoggerContext[]")
        glob = self._symbol_va(kernel, "WmipLoggerContext")
        if glob is not None:
            capacity = MAXLOGGERS
            sym = kernel.get_symbol("WmipLoggerContext")
            if sym.type is not None:
                try:
                    capacity = int(sym.type.vol.count)
                except AttributeError:
                    pass
            return glob, capacity, None, "global WmipLoggerContext[]"
        dd = self._symbol_va(kernel, "EtwpDebuggerData")
        if dd is not None:
            try:
                return self._read_ptr(layer, ptr_size, dd + 0x10), MAXLOGGERS, None, "EtwpDebuggerData + 0x10"
            except exceptions.InvalidAddressException:
                vollog.warning("EtwpDebuggerData at %#x is unreadable", dd)
        return None, 0, None, "none"

    def _unicode(self, ustr) -> Tuple[bool, Optional[str]]:
        """(plausible, text): text None if the characters are unreadable."""
        length = int(ustr.Length)
        maximum = int(ustr.MaximumLength)
        buffer = int(ustr.Buffer)  # volatility's layers accept it with or without bits 48-63
        if length % 2 or length > maximum:
            return False, None
        if length == 0:
            return True, ""
        if buffer == 0:
            return False, None
        try:
            data = self.context.layers[ustr.vol.layer_name].read(buffer, length)
        except exceptions.InvalidAddressException:
            return True, None
        return True, data.decode("utf-16-le", errors="replace")

    # ---------------------------------------------------------------------- generator
    def _generator(self) -> Iterator[Tuple[int, tuple]]:
        kernel = self._kernel()
        layer = self.context.layers[kernel.layer_name]
        ptr_size = kernel.get_type("pointer").size
        canon = lambda va: self._canonical(va, ptr_size)  # noqa: E731
        if not kernel.has_type("_WMI_LOGGER_CONTEXT"):
            vollog.error("the kernel's symbols have no _WMI_LOGGER_CONTEXT")
            return
        ctx_type = kernel.get_type("_WMI_LOGGER_CONTEXT")
        has_silo_field = ctx_type.has_member("SiloState")
        array, capacity, silo, route = self._find_array(kernel, layer, ptr_size)
        array = canon(array) if array else array
        silo = canon(silo) if silo else None
        if not array:
            vollog.error("no logger-context array found (route: %s)", route)
            return
        vollog.info("logger array %#x, %d slots, via %s", array, capacity, route)
        # 16-byte alignment of contexts is confirmed for x64 1709+ only; 8 is safe everywhere.
        align = 8 if ptr_size == 8 else 4
        for slot in range(capacity):
            try:
                value = self._read_ptr(layer, ptr_size, array + slot * ptr_size)
            except exceptions.InvalidAddressException:
                vollog.info("slot %d: array entry unreadable", slot)
                continue
            value = canon(value)
            if value == 0 or value & 1 or value == array:
                continue  # free, or (5.x) in transition
            if not self._is_kernel_va(value, ptr_size) or value % align:
                vollog.info("slot %d: %#x is not an aligned kernel address", slot, value)
                continue
            try:
                ctx = kernel.object("_WMI_LOGGER_CONTEXT", offset=value, absolute=True)
                logger_id = int(ctx.LoggerId)
                if logger_id != slot:
                    vollog.info("slot %d: %#x has LoggerId %#x", slot, value, logger_id)
                    continue
                if silo is not None and has_silo_field and canon(int(ctx.SiloState)) != silo:
                    vollog.info("slot %d: %#x belongs to silo state %#x", slot, value,
                                canon(int(ctx.SiloState)))
                    continue
                ok, name = self._unicode(ctx.LoggerName)
                if not ok:
                    vollog.info("slot %d: %#x has an implausible LoggerName", slot, value)
                    continue
                lf_ok, log_file = self._unicode(ctx.LogFileName)
                mode = int(ctx.LoggerMode)
                buffer_size = int(ctx.BufferSize)
            except exceptions.InvalidAddressException as e:
                vollog.info("slot %d: %#x is unreadable (%s)", slot, value, e)
                continue
            yield (0, (
                logger_id,
                name if name is not None else renderers.UnreadableValue(),
                log_file if (lf_ok and log_file) else renderers.NotApplicableValue(),
                format_hints.Hex(mode),
                format_hints.Hex(buffer_size),
                format_hints.Hex(value),
            ))

    def run(self):
        return renderers.TreeGrid(
            [
                ("LoggerId", int),
                ("LoggerName", str),
                ("LogFileName", str),
                ("LoggerMode", format_hints.Hex),
                ("BufferSize", format_hints.Hex),
                ("Address", format_hints.Hex),
            ],
            self._generator(),
        )
