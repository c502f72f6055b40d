"""Reading summaries and parameter descriptions from docstrings."""

from __future__ import annotations

from tubeless.agent._docstrings import read_docstring


def test_google_style_args_are_read_with_continuations() -> None:
    """`Args:` entries keep their continuation lines and stop at the next section."""
    doc = """Look up the weather.

        More prose here.

        Args:
            city (str): the city,
                as written locally.
            days: how many days.
                note: this line continues `days`.

        Returns:
            days: not a parameter.
        """
    read = read_docstring(doc)

    assert read.summary == "Look up the weather."
    assert read.parameters == {
        "city": "the city, as written locally.",
        "days": "how many days. note: this line continues `days`.",
    }


def test_sphinx_style_params_are_read() -> None:
    """`:param name:` fields are read, and the summary spans its whole first paragraph."""
    doc = """Look up
    the weather.

    :param city: the city
        name.
    :param int days: how many days.
    :returns: the weather.
    """
    read = read_docstring(doc)

    assert read.summary == "Look up the weather."
    assert read.parameters == {"city": "the city name.", "days": "how many days."}


def test_no_docstring_or_only_sections_has_no_summary() -> None:
    """A missing, blank or section-only docstring gives no summary."""
    assert read_docstring(None).summary is None
    assert read_docstring("  \n ").summary is None
    only_args = read_docstring("Args:\n    city: the city.\n")
    assert only_args.summary is None
    assert only_args.parameters == {"city": "the city."}
