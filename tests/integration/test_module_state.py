#!/usr/bin/env python3
"""Reconcilers keep their state where their parameters say.

A reconciler's memory belongs to the operator that runs it (operator.h:
op->objsync, and every reconciler's state in the registry's slots,
reached with controller_of(op), nss_of(op), ...), so a function's
parameters say what it touches. This test reads every tracked C file of
reconcilers/ and lists each writable `static` variable, at file scope or in
a function: a `static` declaration that is not a function and has no
`const` before its name or initializer. Constant tables (`static const
map_type ...`, `static const char *const ...`) are fine.

The files in KNOWN still keep state that way, each with the reason; the test
fails on a variable anywhere else, and on a KNOWN file that no longer has
one (so the list only shrinks). The checker first proves on made-up text
that it finds what it must and passes what it must, so a broken parser
cannot pass vacuously.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_layers  # noqa: E402  (its tracked_files)

ROOT = test_layers.ROOT
FOLDERS = ("reconcilers",)

# file -> why it still has static state (none left: every reconciler's
# state is the operator's)
KNOWN = {}

STATIC = re.compile(r"^\s*static\s+(.*)$")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip_comments(text):
    """Comments and string/char literals blanked, line structure kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def declaration(lines, k):
    """The text of the declaration starting at line k, up to its first '=', ';' or '{' (joined lines)."""
    text = ""
    for line in lines[k : k + 8]:
        text += " " + line
        if re.search(r"[=;{]", line):
            break
    return re.split(r"[=;{]", text, maxsplit=1)[0]


def is_function(head):
    """head: the declaration up to '=', ';' or '{' (after 'static')."""
    p = head.find("(")
    if p < 0:
        return False
    # static void (*hook)(void): a pointer to a function is a variable.
    return not re.match(r"\(\s*\*", head[p:])


def writable_statics(text):
    """[(line, name)] of the static variables without const."""
    lines = strip_comments(text).splitlines()
    found = []
    for k, line in enumerate(lines):
        m = STATIC.match(line)
        if not m:
            continue
        head = declaration(lines, k)
        head = head[head.find("static") + len("static") :]
        if is_function(head) or "const" in WORD.findall(head):
            continue
        found.append((k + 1, variable_name(head, lines, k)))
    return found


def variable_name(head, lines, k):
    """The name declared: after '(*' for a function pointer, after the closing brace for
    `static struct { ... } S`, else the last word before '['."""
    m = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)", head)
    if m:
        return m.group(1)
    names = WORD.findall(head.split("[")[0])
    if names and names[-1] not in ("struct", "union", "enum"):
        return names[-1]
    m = re.search(r"\}\s*([A-Za-z_]\w*)\s*[;=\[]", "\n".join(lines[k : k + 200]))
    return m.group(1) if m else "?"


def self_check():
    made_up = """
static const map_type t = {.val_free = free};      /* a constant: fine */
static const char *const names[] = {"a", "b"};
static int helper(int x);
static void (*hook)(void);                          /* state */
static struct {
    int a;
} S;                                                /* state */
static crc_module M = {
    .name = "x",
};                                                  /* state */
static inline int f(void)
{
    static char buf[64];                            /* state, in a function */
    return buf[0];
}
/* static int in_a_comment; */
static map_t remembered = MAP_TYPED(&t);            /* state */
static int
split_function(int a)
{
    return a;
}
"""
    got = [name for _, name in writable_statics(made_up)]
    want = ["hook", "S", "M", "buf", "remembered"]
    if got != want:
        print("self-check failed: expected %s, got %s" % (want, got))
        return False
    return True


def tracked_files():
    """The tracked C files of FOLDERS (test_layers.py lists the tracked C files of every layer)."""
    return sorted(f for f in test_layers.tracked_files() if f.split("/")[0] in FOLDERS)


def main():
    if not self_check():
        return 1
    files = tracked_files()
    if len(files) < 20:
        print("only %d C files found under %s: not the source tree?" % (len(files), ROOT))
        return 1
    bad = []
    with_state = set()
    for f in files:
        try:
            with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
                found = writable_statics(fh.read())
        except OSError:
            continue  # deleted in the working tree
        if not found:
            continue
        with_state.add(f)
        if f in KNOWN:
            print("known: %s: %s: %s" % (f, ", ".join(n for _, n in found), KNOWN[f]))
            continue
        for line, name in found:
            bad.append("%s:%d: static state `%s`: keep it in a struct the operator owns and pass it" % (f, line, name))
    for f in sorted(set(KNOWN) - with_state):
        bad.append("%s: listed in KNOWN but keeps no static state any more: take it off the list" % f)
    for b in bad:
        print(b)
    print("%d files read, %d with static state (%d known), %d problems" % (len(files), len(with_state), len(KNOWN), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
