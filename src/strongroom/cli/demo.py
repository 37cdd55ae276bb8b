"""``strongroom demo``: the end-to-end story on a local stack it starts and stops itself."""

from __future__ import annotations

import click

from strongroom.cli.output import Output


@click.command()
@click.pass_obj
def demo(out: Output) -> None:
    """Run the whole strongroom story end to end and print what happened."""
    from strongroom.demo.chapters import all_chapters
    from strongroom.demo.story import run_story

    summary = run_story(out, all_chapters())
    if out.name == "json":
        out.result(summary)
