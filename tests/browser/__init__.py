def console_errors(page):  # type: ignore[no-untyped-def]
    """A list that collects the errors ``page``'s scripts log (htmx logs a refused request this
    way). Chromium's own "Failed to load resource" line for every 4xx answer is the network's."""
    logged: list[str] = []

    def on_console(msg):  # type: ignore[no-untyped-def]
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            logged.append(msg.text)

    page.on("console", on_console)
    return logged
