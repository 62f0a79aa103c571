#!/usr/bin/env python3
"""The command tree of kops (Go) against kops-rs: every command and flag
that kops' `--help` lists, and whether kops-rs accepts it. Prints the counts
and what is missing; asserts nothing.

usage: bench/command_tree.py [KOPS_GO] [KOPS_RS]
(default: ~/.cache/kops-go/kops-go and target/debug/kops)

A flag is present when kops-rs' help for the same command names it, or,
when the help does not (a hidden alias), when kops-rs does not answer
`--FLAG` with "unexpected argument". Global flags are counted once, on the
root command. Commands kops hides (gen-cli-docs, helpers) are not listed by
its help and so not compared; `completion` is cobra's own.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GO = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/kops-go/kops-go")
RS = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "target/debug/kops")
ENV = dict(os.environ, KOPS_STATE_STORE="", HOME="/nonexistent", COLUMNS="200")
FLAG = re.compile(r"^\s+(?:-\w, )?--([\w-]+)")


def helptext(binary, path):
    out = subprocess.run([binary, *path, "--help"], capture_output=True, text=True, env=ENV)
    return out.stdout + out.stderr


def sections(text):
    """Cobra help: {section title: [lines]}."""
    result, current = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
            result[current] = []
        elif current and line.strip():
            result[current].append(line)
    return result


def go_tree(path=()):
    """Yields (command path, [flags]) for kops and each of its subcommands."""
    s = sections(helptext(GO, list(path)))
    flags = [m.group(1) for line in s.get("Flags", []) for m in [FLAG.match(line)] if m]
    flags = [f for f in flags if f != "help"]
    yield path, flags
    for line in s.get("Available Commands", []):
        name = line.split()[0]
        if name in ("help", "completion") and path:
            continue
        if name == "help":
            continue
        yield from go_tree(path + (name,))


def rs_has_command(path):
    out = subprocess.run([RS, *path, "--help"], capture_output=True, text=True, env=ENV)
    return out.returncode == 0


def rs_has_flag(path, flag, help_text):
    if re.search(r"--" + re.escape(flag) + r"\b", help_text):
        return True
    out = subprocess.run([RS, *path, "--" + flag, "--help"], capture_output=True, text=True, env=ENV)
    return "unexpected argument" not in out.stderr


def main():
    for b in (GO, RS):
        if not os.access(b, os.X_OK):
            print(f"skipped: no binary at {b}")
            return
    commands = flags = missing_commands = missing_flags = 0
    missing = []
    for path, go_flags in go_tree():
        if not path:
            continue  # the root's "Flags" are the globals: counted below
        commands += 1
        if not rs_has_command(path):
            missing_commands += 1
            missing_flags += len(go_flags)
            flags += len(go_flags)
            missing.append(f"command  kops {' '.join(path)} ({len(go_flags)} flags)")
            continue
        text = helptext(RS, list(path))
        for f in go_flags:
            flags += 1
            if not rs_has_flag(path, f, text):
                missing_flags += 1
                missing.append(f"flag     kops {' '.join(path)} --{f}")
    # Global flags: those of the root command.
    root = sections(helptext(GO, []))
    globals_ = [m.group(1) for line in root.get("Flags", []) for m in [FLAG.match(line)] if m]
    globals_ = [f for f in globals_ if f != "help"]
    rs_root = helptext(RS, [])
    for f in globals_:
        flags += 1
        if not rs_has_flag([], f, rs_root):
            missing_flags += 1
            missing.append(f"global   --{f}")
    for m in missing:
        print(m)
    print(f"commands: {commands - missing_commands} of {commands} present in kops-rs")
    print(f"flags:    {flags - missing_flags} of {flags} present in kops-rs (globals included)")
    print(f"missing:  {missing_commands} commands, {missing_flags} flags")


if __name__ == "__main__":
    main()
