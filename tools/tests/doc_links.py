"""Every relative link in README.md, docs/*.md, cuda/README.md and the
READMEs under docs/results/ points to a file or folder that exists.

Registered in CTest as docs.links (CMakeLists.txt); run by hand with
    python3 tools/tests/doc_links.py
Links with a scheme (http:, https:, mailto:) and pure #anchors are not
checked; a link's #anchor part is dropped before the path is looked up.
"""
import glob
import os
import re
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# [text](target) and ![alt](target); the target ends at the first space or ')'
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# reference definitions: [name]: target
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")


def documents():
    pats = ["README.md", "docs/*.md", "cuda/README.md", "docs/results/**/README.md"]
    out = []
    for p in pats:
        out += glob.glob(os.path.join(ROOT, p), recursive=True)
    return sorted(set(out))


def links(text):
    text = FENCE.sub("", text)
    text = CODE.sub("", text)
    return LINK.findall(text) + REFDEF.findall(text)


def broken(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    bad = []
    for target in links(text):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
            continue
        rel = target.split("#", 1)[0]
        if not rel:
            continue
        full = os.path.normpath(os.path.join(os.path.dirname(path), rel))
        if not os.path.exists(full):
            bad.append(target)
    return bad


class DocLinks(unittest.TestCase):
    def test_documents_found(self):
        names = [os.path.relpath(p, ROOT) for p in documents()]
        self.assertIn("README.md", names)
        self.assertIn(os.path.join("docs", "results.md"), names)

    def test_relative_links_resolve(self):
        problems = []
        for path in documents():
            for target in broken(path):
                problems.append("%s: %s" % (os.path.relpath(path, ROOT), target))
        self.assertEqual(problems, [], "links to missing files:\n  " + "\n  ".join(problems))

    def test_parser(self):
        text = ("see [a](x/y.md#s) and ![p](img.png) and [w](https://e.org) [h](#top)\n"
                "`[not](a link)`\n```\n[nor](this)\n```\n[r]: ref/target.log\n")
        self.assertEqual(links(text), ["x/y.md#s", "img.png", "https://e.org", "#top",
                                       "ref/target.log"])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[1:])
