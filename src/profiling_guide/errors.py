"""The one exception type the guide raises for things a user can fix."""


class GuideError(Exception):
    """A problem the user can act on, said in one line.

    The command-line entry points print ``error: <message>`` and exit with
    status 2 instead of showing a traceback; example scripts let it propagate
    so a docs build stops at the page that cannot be built.
    """
