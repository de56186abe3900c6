"""Why an executable would run without the shim, found by reading its file.

The dynamic loader honours ``LD_PRELOAD`` only for dynamically linked programs of the
shim's ELF class that do not run in secure-execution mode; Go programs load it but make
their system calls directly. :func:`why_untraceable` names the reason, or returns None.
"""

from __future__ import annotations

import os
import stat
import struct
from functools import lru_cache

PT_INTERP = 3
SHEBANG_DEPTH = 4


def why_untraceable(path: str | None) -> str | None:
    """The reason the program at ``path`` cannot be traced by the shim, or None."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _classify(path, _key(st))


def _key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_ino, st.st_mtime_ns, st.st_mode, st.st_uid, st.st_gid)


@lru_cache(maxsize=1024)
def _classify(path: str, key: tuple[int, ...], depth: int = 0) -> str | None:
    _ino, _mtime, mode, uid, gid = key
    # Secure-execution mode (AT_SECURE) starts when the program changes the process's ids.
    if (mode & stat.S_ISUID and uid != os.getuid()) or (mode & stat.S_ISGID and gid != os.getgid()):
        return "setuid/setgid program: the loader ignores LD_PRELOAD"
    try:
        if os.getxattr(path, "security.capability"):
            return "program with file capabilities: the loader ignores LD_PRELOAD"
    except OSError:
        pass
    try:
        with open(path, "rb") as f:
            head = f.read(256)
            if head.startswith(b"#!"):
                return _script(head, depth)
            if head[:4] != b"\x7fELF":
                return None  # not a native program; whatever runs it is checked itself
            return _elf(f, head)
    except OSError:
        return None


def _script(head: bytes, depth: int) -> str | None:
    if depth >= SHEBANG_DEPTH:
        return None
    line = head[2:].split(b"\n", 1)[0].strip()
    if not line:
        return None
    interp = os.fsdecode(line.split()[0])
    try:
        st = os.stat(interp)
    except OSError:
        return None
    reason = _classify(interp, _key(st), depth + 1)
    return f"interpreter {interp}: {reason}" if reason else None


def _elf(f, head: bytes) -> str | None:
    ei_class, ei_data = head[4], head[5]
    if ei_class != 2:
        return "32-bit program: the 64-bit shim cannot be loaded into it"
    end = "<" if ei_data == 1 else ">"
    (e_phoff,) = struct.unpack_from(end + "Q", head, 0x20)
    (e_shoff,) = struct.unpack_from(end + "Q", head, 0x28)
    e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = struct.unpack_from(
        end + "HHHHH", head, 0x36
    )
    f.seek(e_phoff)
    phdrs = f.read(e_phentsize * e_phnum)
    interp = any(
        struct.unpack_from(end + "I", phdrs, i * e_phentsize)[0] == PT_INTERP
        for i in range(e_phnum)
    )
    if not interp:
        return "statically linked: the shim cannot be preloaded"
    if _has_go_section(f, end, e_shoff, e_shentsize, e_shnum, e_shstrndx):
        return "Go program: makes system calls directly, bypassing the shim"
    return None


def _has_go_section(f, end: str, shoff: int, shentsize: int, shnum: int, shstrndx: int) -> bool:
    if not shoff or not shnum or shstrndx >= shnum or shentsize < 0x40:
        return False
    f.seek(shoff)
    shdrs = f.read(shentsize * shnum)
    if len(shdrs) < shentsize * shnum:
        return False
    str_off, str_size = struct.unpack_from(end + "QQ", shdrs, shstrndx * shentsize + 0x18)
    f.seek(str_off)
    names = f.read(min(str_size, 1 << 16))
    return b".go.buildinfo\0" in names or b".note.go.buildid\0" in names


def loads_the_shim(path: str, depth: int = 0) -> bool:
    """Whether the program at ``path`` (a script: its interpreter) is started by glibc's
    dynamic loader (its ``PT_INTERP`` is an ``ld-linux*``), which preloads the shim named
    in ``LD_PRELOAD`` before any code of the program runs; a musl or other loader may
    not. Combined with :func:`why_untraceable` being None (not setuid, no file
    capabilities, the right class, not Go)."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
            if head.startswith(b"#!"):
                line = head[2:].split(b"\n", 1)[0].strip()
                if not line or depth >= SHEBANG_DEPTH:
                    return False
                return loads_the_shim(os.fsdecode(line.split()[0]), depth + 1)
            if head[:4] != b"\x7fELF" or head[4] != 2:
                return False
            end = "<" if head[5] == 1 else ">"
            (e_phoff,) = struct.unpack_from(end + "Q", head, 0x20)
            e_phentsize, e_phnum = struct.unpack_from(end + "HH", head, 0x36)
            f.seek(e_phoff)
            phdrs = f.read(e_phentsize * e_phnum)
            for i in range(e_phnum):
                p_type, _flags, p_offset, _va, _pa, p_filesz = struct.unpack_from(
                    end + "IIQQQQ", phdrs, i * e_phentsize
                )
                if p_type == PT_INTERP:
                    f.seek(p_offset)
                    interp = f.read(min(p_filesz, 4096)).split(b"\0", 1)[0]
                    return os.path.basename(interp).startswith(b"ld-linux")
    except (OSError, struct.error):
        return False
    return False
