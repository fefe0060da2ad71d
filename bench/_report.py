"""Shared by the pytest-benchmark modules in bench/."""


def write_report(request, lines):
    """Print lines after a module's benchmarks, past pytest's output capture."""
    plugins = request.config.pluginmanager
    tr, capman = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if tr is None or capman is None or not lines:
        return
    with capman.global_and_fixture_disabled():
        tr.write_line("")
        for line in lines:
            tr.write_line(line)
