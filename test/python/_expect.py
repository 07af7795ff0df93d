"""The bad-input check every test tier uses: call ``fn`` and require a clear error (docs: "bad input gets a clear
Python error before any launch"). Shared by the simulator work modules and the GPU tests (``test/python`` is on
their path)."""


def expect_error(fails, what, fn, *needles, exc=ValueError, one_line=False, prefix=None):
    """Append a failure to ``fails`` unless ``fn()`` raises ``exc`` (an exception type or a tuple of them) whose
    message holds every one of ``needles`` -- and, with ``one_line``, has no line break; with ``prefix`` (a str or a
    tuple of them), starts with one of them (the op's name). Another exception, or none, is a failure too. Returns
    None; never raises for what ``fn`` does."""
    try:
        fn()
    except exc as e:
        msg = str(e)
        missing = [n for n in needles if n not in msg]
        if missing:
            fails.append(f"{what}: message {msg!r} lacks {missing}")
        elif one_line and "\n" in msg:
            fails.append(f"{what}: message {msg!r} is not one line")
        elif prefix is not None and not msg.startswith(prefix):
            fails.append(f"{what}: message {msg!r} does not start with {prefix!r}")
        return
    except Exception as e:  # noqa: BLE001 - any other error is a failure of the check
        names = " or ".join(t.__name__ for t in (exc if isinstance(exc, tuple) else (exc, )))
        fails.append(f"{what}: raised {type(e).__name__}: {e} instead of {names}")
        return
    fails.append(f"{what}: no error")


def one_line_checker(fails, **kw):
    """``expect(what, fn, *needles)``: :func:`expect_error` into ``fails`` for one-line ValueErrors (``kw`` passed on,
    e.g. ``prefix``)."""

    def expect(what, fn, *needles):
        expect_error(fails, what, fn, *needles, one_line=True, **kw)

    return expect
