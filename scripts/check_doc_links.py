#!/usr/bin/env python3
"""check_doc_links.py ROOT - the references in README.md and doc/**/*.md lead
somewhere (meson test `doc-links`; `--self-test`, meson test `doc-links-self`,
checks the checker on a small tree of right and broken references).

Checked, in every Markdown file outside code blocks:
  1. links [text](target) that are not URLs: the file (relative to the
     document) exists, and a #anchor names one of its headings (GitHub's slugs);
  2. paths written out in the text (`doc/notes/ucx_measurements.md`,
     `benchmarks/lab/ucx_profile.sh`, `lib/coll/`): the file or folder exists
     under ROOT; a program named by its source's path without the extension
     (`benchmarks/weft_osu_halo`) counts when PATH.c exists;
     (`benchmarks/weft_osu_halo`) counts when PATH.* exists, a program built
     in that folder when its meson.build names it; words in capitals are
     placeholders (`tests/fuzz/corpus/NAME/`) and end the check there;
     doc/install.md's `lib/...` are paths of the installed tree;
  3. a document named with a section in quotes (`doc/design.md, "Requests"`,
     `doc/design.md ("Requests")`): that document has a heading, or a
     paragraph or list item opening in bold (`**Binding.**`), that starts
     with the quoted words.
Paths inside code blocks are commands, often of build outputs, and are not
checked. Prints each broken reference as FILE:LINE: ... and exits 1 if any.
"""
import glob
import os
import re
import sys

TOP = ("doc", "benchmarks", "scripts", "tools", "tests", "lib", "progress", "backends",
       "include", "loom", "python", "interpose", "cmake")
PATH_RE = re.compile(r"(?<![\w/.$-])((?:%s)/[\w./+-]*[\w/])" % "|".join(TOP))
LINK_RE = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
SECTION_RE = re.compile(r"((?:doc/)?[\w/]+\.md)(?:`)?(?:,\s*|\s*\(|\s+)\"([^\"]+)\"")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped,
    spaces to hyphens."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


BOLD_RE = re.compile(r"^\s*(?:[-*]|\d+\.)?\s*\*\*([^*]+)\*\*")


def headings(path, bold=False, cache={}):
    """The headings of a Markdown file (bold=True: also the bold words that
    open a paragraph or a list item)."""
    if path not in cache:
        out, strong = [], []
        in_code = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("```"):
                    in_code = not in_code
                elif not in_code and line.startswith("#"):
                    out.append(line.lstrip("#").strip().replace("`", ""))
                elif not in_code and BOLD_RE.match(line):
                    strong.append(BOLD_RE.match(line).group(1).replace("`", ""))
        cache[path] = (out, strong)
    out, strong = cache[path]
    return out + strong if bold else out


def anchors(path):
    seen, out = {}, set()
    for h in headings(path):
        s = slug(h)
        n = seen.get(s, 0)
        out.add(s if n == 0 else "%s-%d" % (s, n))
        seen[s] = n + 1
    return out


def built_here(full):
    """A program that the meson.build of its folder builds (its name in quotes)."""
    mb = os.path.join(os.path.dirname(full), "meson.build")
    if not os.path.isfile(mb):
        return False
    with open(mb, encoding="utf-8") as f:
        return "'%s'" % os.path.basename(full) in f.read()


def text_lines(path):
    """(line number, text) outside fenced code blocks."""
    in_code = False
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            if not in_code:
                yield no, line


def doc_path(root, name, here):
    """A document named in the text: relative to ROOT, else to the document."""
    for base in (root, os.path.dirname(here), os.path.join(root, "doc")):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p):
            return p
    return None


def check(root, path):
    errors = []
    rel = os.path.relpath(path, root)
    for no, line in text_lines(path):
        where = "%s:%d" % (rel, no)
        link_spans = []
        for m in LINK_RE.finditer(line):
            target = m.group(1) or m.group(2)
            link_spans.append(m.span(1) if m.group(1) else m.span(2))
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                errors.append("%s: link to a missing file: %s" % (where, target))
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                errors.append("%s: link to a missing heading: %s" % (where, target))
        for m in PATH_RE.finditer(line):
            if any(a <= m.start() < b for a, b in link_spans):
                continue  # a link's target: checked above
            p = m.group(1).rstrip(".")
            if any(c in p for c in "*<>"):
                continue
            parts = p.split("/")
            for i, part in enumerate(parts):
                if re.fullmatch(r"[A-Z][A-Z_]+(\.\w+)?", part):  # a placeholder (NAME, NAME.1)
                    p = "/".join(parts[:i])
                    break
            if rel == os.path.join("doc", "install.md") and p.startswith("lib/"):
                continue  # the installed tree, not the source
            full = os.path.join(root, p)
            if not (os.path.exists(full) or glob.glob(glob.escape(full) + ".*") or
                    built_here(full)):
                errors.append("%s: names a path that does not exist: %s" % (where, p))
        for m in SECTION_RE.finditer(line):
            dest = doc_path(root, m.group(1), path)
            if dest is None:
                continue  # a missing file is reported above when it is a path
            want = m.group(2).lower().replace("`", "")
            if not any(h.lower().startswith(want) for h in headings(dest, bold=True)):
                errors.append('%s: %s has no section "%s"' % (where, m.group(1), m.group(2)))
    return errors


def check_tree(root):
    files = [os.path.join(root, "README.md")]
    for d, _, names in os.walk(os.path.join(root, "doc")):
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    errors = []
    for f in sorted(files):
        errors += check(root, f)
    return files, errors


def self_test():
    """The checker on a small tree with one reference of each kind right and
    one of each kind broken: exactly the broken ones must be reported."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "doc", "notes"))
        os.makedirs(os.path.join(root, "benchmarks", "lab"))
        os.makedirs(os.path.join(root, "tests", "fuzz", "corpus"))
        for p in ("benchmarks/lab/probe.c", "benchmarks/meson.build"):
            open(os.path.join(root, p), "w").write("executable('built_prog', 'x.c')\n")
        open(os.path.join(root, "doc", "notes", "n.md"), "w").write(
            "# Notes\n\n## The lab programs\n\n**Binding.** text\n")
        open(os.path.join(root, "README.md"), "w").write(
            "[ok](doc/notes/n.md) [ok](doc/notes/n.md#the-lab-programs) [url](https://x.org/y)\n"
            "`benchmarks/lab/probe.c`, `benchmarks/lab/probe`, `benchmarks/built_prog`,\n"
            "`tests/fuzz/corpus/NAME/` is a placeholder, doc/notes/n.md, \"Binding\"\n"
            "```\nbenchmarks/in_code_block_not_checked\n```\n"
            "[bad1](doc/notes/missing.md) [bad2](doc/notes/n.md#no-such-heading)\n"
            "`benchmarks/lab/gone.sh` doc/notes/n.md (\"No such section\")\n")
        _, errors = check_tree(root)
    want = ["README.md:7: link to a missing file: doc/notes/missing.md",
            "README.md:7: link to a missing heading: doc/notes/n.md#no-such-heading",
            "README.md:8: names a path that does not exist: benchmarks/lab/gone.sh",
            'README.md:8: doc/notes/n.md has no section "No such section"']
    if sorted(errors) != sorted(want):
        print("check_doc_links: self-test FAILED\n  reported: %s\n  expected: %s" % (errors, want))
        return 1
    print("check_doc_links: self-test ok (%d broken references found, none else)" % len(want))
    return 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        print("usage: check_doc_links.py ROOT | --self-test\n" + __doc__.split("\n", 1)[1])
        return 0
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print("usage: check_doc_links.py ROOT | --self-test", file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    files, errors = check_tree(root)
    for e in errors:
        print(e)
    print("check_doc_links: %d files, %d broken references" % (len(files), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
