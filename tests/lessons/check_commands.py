#!/usr/bin/env python3
"""Every `./inferlab …` command line the lessons and the README show is one the CLI accepts: its
command exists (it answers --help), and every --option on the line is one that command's --help
names. A reader who copies a line from a lesson gets what the lesson says, not "unknown option".

    check_commands.py ROOT [--inferlab PATH]    check; exit 1 listing each line that would fail
    check_commands.py ROOT --self-test          a made-up option and a made-up command are caught

Options after `test` and after `student test chNN` go to ctest, and `bench` passes its options to
the chapter's benchmark: those are not checked. Lines shown as a pattern (with … or [optional]
parts) are checked for what they spell out. Plain python3, standard library only.
"""
import re
import subprocess
import sys
from pathlib import Path

SOURCES = ["README.md", "chapters/*/README.md", "docs/pages/*.md", "exercises/*/README.md", "tests/*/README.md"]
LINE = re.compile(r"\./inferlab ([a-z][a-z-]*)((?: [^`|;&)\n]*)?)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
PASSTHROUGH = {"test", "bench", "cuda-run"}  # their options go to ctest / the benchmark / the program


def shown_lines(root):
    """(file, line number, command, the option names on it) of every `./inferlab` line."""
    for pattern in SOURCES:
        for path in sorted(root.glob(pattern)):
            for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for match in LINE.finditer(text):
                    command, rest = match.group(1), match.group(2).split(" #")[0]
                    if command == "student" and re.match(r"\s*(test|build) ", rest):
                        rest = ""  # after the chapter: ctest's options
                    options = [] if command in PASSTHROUGH else OPTION.findall(rest)
                    yield path.relative_to(root), number, command, options


def help_text(inferlab, command, cache):
    if command not in cache:
        run = subprocess.run([str(inferlab), command, "--help"], capture_output=True, text=True, timeout=300)
        cache[command] = (run.returncode, run.stdout + run.stderr)
    return cache[command]


def problems(root, inferlab, lines):
    cache, found = {}, []
    for path, number, command, options in lines:
        status, text = help_text(inferlab, command, cache)
        if status != 0:
            found.append(f"{path}:{number}: `./inferlab {command}`: no such command ({command} --help exits {status})")
            continue
        for option in options:
            if option != "--help" and not re.search(re.escape(option) + r"(?![\w-])", text):
                found.append(f"{path}:{number}: `./inferlab {command} … {option}`: {command} --help names no {option}")
    return found


def self_test(root, inferlab):
    good = list(shown_lines(root))
    assert good, "no ./inferlab lines found: the pattern is wrong"
    planted = [(Path("lesson.md"), 1, "generate", ["--model", "--no-such-option"]),
               (Path("lesson.md"), 2, "no-such-command", [])]
    found = problems(root, inferlab, planted)
    assert len(found) == 2 and "--no-such-option" in found[0] and "no such command" in found[1], found
    print(f"check_commands self-test: a made-up option and a made-up command are caught ({len(good)} lines found)")


def main():
    root = Path(sys.argv[1]).resolve()
    inferlab = root / "inferlab"
    if "--inferlab" in sys.argv:
        inferlab = Path(sys.argv[sys.argv.index("--inferlab") + 1])
    if "--self-test" in sys.argv:
        self_test(root, inferlab)
        return 0
    lines = list(shown_lines(root))
    found = problems(root, inferlab, lines)
    for line in found:
        print(line)
    print(f"check_commands: {len(lines)} command lines, {len(found)} that the CLI would refuse")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
