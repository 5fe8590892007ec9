"""Bibliography labels that match the author-year citations of the text (a Sphinx extension).

The chapters cite author-year ("Castin et al. (2025)"); pybtex's plain style would number the
reference list instead. This registers a pybtex style, ``book_author_year``: the plain formatting,
sorted by author, with labels such as "Castin et al., 2025" (two authors: "A and B").
``_config.yml`` loads it through ``sphinx.local_extensions`` and sets it as ``bibtex_default_style``.
"""

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle


class AuthorYearLabels(BaseLabelStyle):
    """Labels "First et al., year" (three or more authors), "A and B, year", "A, year"; labels that
    would coincide get a letter in the order of the reference list ("Sander et al., 2022a", "2022b")."""

    def format_labels(self, sorted_entries):
        labels = []
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            names = [" ".join(p.last_names) for p in people]
            names = [n.replace("{", "").replace("}", "") for n in names]
            if len(names) > 2:
                who = f"{names[0]} et al."
            elif len(names) == 2:
                who = f"{names[0]} and {names[1]}"
            else:
                who = names[0] if names else entry.key
            labels.append(f"{who}, {entry.fields.get('year', 'n.d.')}")
        seen: dict[str, int] = {}
        for label in labels:
            if labels.count(label) > 1:
                seen[label] = seen.get(label, 0) + 1
                label += "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            yield label


class AuthorYearStyle(PlainStyle):
    """pybtex's plain style with author-year labels."""

    default_label_style = "book_author_year"


def setup(app):
    """Register the label style and the formatting style with pybtex."""
    register_plugin("pybtex.style.labels", "book_author_year", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "book_author_year", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
