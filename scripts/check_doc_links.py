"""Offline link check of the built documentation site: every relative link and image in every page must
point at a file of the site, and every #fragment at an id on that page. External links are not followed
(the machines that build this have no network); they are only counted."""

import html.parser
import os
import sys
import urllib.parse


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for name in ("href", "src"):
            if attrs.get(name) and tag in ("a", "img", "link", "script"):
                self.links.append(attrs[name])


def _parse(path):
    parser = _Links()
    with open(path, encoding="utf-8") as f:
        parser.feed(f.read())
    return parser


def main(root: str) -> int:
    pages = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".html"):
                path = os.path.normpath(os.path.join(folder, name))
                pages[path] = _parse(path)
    broken, external = [], 0
    for page, parsed in pages.items():
        for link in parsed.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or url.netloc:
                external += 1
                continue
            target = page if not url.path else os.path.normpath(os.path.join(os.path.dirname(page), url.path))
            if not os.path.exists(target):
                broken.append(f"{page}: {link} (no such file)")
            elif url.fragment and target in pages and url.fragment not in pages[target].ids:
                broken.append(f"{page}: {link} (no such anchor)")
    for line in broken:
        print("broken link:", line, file=sys.stderr)
    print(f"checked {len(pages)} pages: {len(broken)} broken internal links, {external} external links not followed")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
