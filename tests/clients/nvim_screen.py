"""What an embedded Neovim shows: its screen as a UI receives it, as text and as a PNG.

`capture(nvim)` attaches a UI (`nvim_ui_attach`, line-based grid, RGB colours) to a
pynvim session, applies the redraw events of the first full draw (`grid_line`,
`hl_attr_define`, ...) to a grid of cells, and detaches.  `Screen.lines()` is the text
of each row; `Screen.save_png(path)` renders the cells with their colours, bold and
underline/undercurl (DejaVu Sans Mono, Pillow), for the screenshots in docs/images.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")
BOLD_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf")


@dataclass
class Screen:
    width: int
    height: int
    #: rows of (text, highlight id) cells
    cells: list[list[tuple[str, int]]] = field(default_factory=list)
    #: highlight id -> rgb attributes (foreground, background, special, bold, underline, undercurl, reverse)
    highlights: dict[int, dict] = field(default_factory=dict)
    foreground: int = 0xFFFFFF
    background: int = 0x000000

    def __post_init__(self):
        if not self.cells:
            self.clear()

    def clear(self) -> None:
        self.cells = [[(" ", 0) for _ in range(self.width)] for _ in range(self.height)]

    def lines(self) -> list[str]:
        return ["".join(text for text, _ in row).rstrip() for row in self.cells]

    # -- redraw events ------------------------------------------------------------------------
    def apply(self, event: str, *calls) -> None:
        for args in calls:
            if event == "grid_resize":
                _grid, width, height = args[:3]
                self.width, self.height = width, height
                self.clear()
            elif event == "default_colors_set":
                foreground, background = args[:2]
                self.foreground = foreground if foreground >= 0 else self.foreground
                self.background = background if background >= 0 else self.background
            elif event == "hl_attr_define":
                self.highlights[args[0]] = args[1]
            elif event == "grid_clear":
                self.clear()
            elif event == "grid_line":
                _grid, row, column, cells = args[:4]
                highlight = 0
                for cell in cells:
                    text = cell[0]
                    if len(cell) > 1:
                        highlight = cell[1]
                    repeat = cell[2] if len(cell) > 2 else 1
                    for _ in range(repeat):
                        if 0 <= row < self.height and 0 <= column < self.width:
                            self.cells[row][column] = (text, highlight)
                        column += 1
            elif event == "grid_scroll":
                _grid, top, bottom, left, right, rows = args[:6]
                region = [row[left:right] for row in self.cells[top:bottom]]
                for index in range(top, bottom):
                    source = index - top + rows
                    if 0 <= source < len(region):
                        self.cells[index][left:right] = region[source]

    # -- rendering ------------------------------------------------------------------------------
    def save_png(self, path: Path, font_size: int = 15) -> None:
        from PIL import Image, ImageDraw, ImageFont

        font = ImageFont.truetype(str(FONT), font_size)
        bold = ImageFont.truetype(str(BOLD_FONT), font_size) if BOLD_FONT.exists() else font
        left, top, right, bottom = font.getbbox("M")
        cell_width = round(font.getlength("M"))
        cell_height = round(font_size * 1.35)
        image = Image.new("RGB", (cell_width * self.width, cell_height * self.height), _rgb(self.background))
        draw = ImageDraw.Draw(image)
        for row_index, row in enumerate(self.cells):
            y = row_index * cell_height
            for column_index, (text, highlight) in enumerate(row):
                attributes = self.highlights.get(highlight, {})
                foreground = attributes.get("foreground", self.foreground)
                background = attributes.get("background", self.background)
                if attributes.get("reverse"):
                    foreground, background = background, foreground
                x = column_index * cell_width
                if background != self.background:
                    draw.rectangle([x, y, x + cell_width - 1, y + cell_height - 1], fill=_rgb(background))
                if text.strip():
                    draw.text((x, y + (cell_height - (bottom - top)) // 2 - top), text, font=bold if attributes.get("bold") else font,
                              fill=_rgb(foreground))  # fmt: skip
                special = attributes.get("special", foreground)
                baseline = y + cell_height - 3
                if attributes.get("undercurl"):
                    points = [(x + step, baseline + (1 if (x + step) // 2 % 2 else -1)) for step in range(0, cell_width + 1, 2)]
                    draw.line(points, fill=_rgb(special), width=1)
                elif attributes.get("underline"):
                    draw.line([(x, baseline), (x + cell_width, baseline)], fill=_rgb(special), width=1)
        path.parent.mkdir(parents=True, exist_ok=True)
        image.save(path)


def _rgb(value: int) -> tuple[int, int, int]:
    return (value >> 16) & 0xFF, (value >> 8) & 0xFF, value & 0xFF


def capture(nvim, width: int = 100, height: int = 16) -> Screen:
    """The screen of `nvim` (a pynvim session) after a full draw at `width` x `height`."""
    screen = Screen(width, height)
    nvim.ui_attach(width, height, rgb=True, ext_linegrid=True)
    try:
        nvim.command("redraw!")
        flushed = False
        while not flushed:  # a UI that attaches gets the whole screen, then `flush`
            message = nvim.next_message()
            if message is None or message[0] != "notification" or message[1] != "redraw":
                continue
            for event, *calls in message[2]:
                if event == "flush":
                    flushed = True
                    break
                screen.apply(event, *calls)
    finally:
        nvim.ui_detach()
    return screen
