import dataclasses
from pathlib import Path

from loop.author.author import author
from loop.author.sweepfile import parse
from loop.core.record import DepthRate, Measurement, Rate, RunRecord
from loop.core.vocab import LayerPrint
from loop.measure.ladder import depth_knee, frame_ladder, link_plateau, network_of

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def rung(name: str, bytes_in: int, fps: float, spread: float = 1.0) -> RunRecord:
    figures = {"bytes_in": bytes_in, "bytes_out": bytes_in // 4, "rate_fps": {"median": fps}, "spread_pct": spread}
    return RunRecord(id=1, sweep="s", variant=name, status="ok", measure=Measurement.from_dict(figures))


def test_seed_link_table_plateaus():
    seed = [
        rung("512p", 1_048_576, 207),
        rung("720p", 3_686_400, 63),
        rung("1080p", 8_294_400, 29),
        rung("4K", 33_177_600, 7.0),
    ]
    name, low, high = link_plateau(seed)
    assert name == "512p" and 270 < low < high < 305


def test_a_link_still_climbing_has_no_plateau_at_the_start():
    climbing = [rung("a", 800_000, 1), rung("b", 800_000, 5), rung("c", 800_000, 9.8), rung("d", 800_000, 10)]
    assert link_plateau(climbing)[0] == "c"


def test_depth_knee_like_the_seed():
    rates = {1: 724, 2: 1300, 4: 1800, 8: 2000, 16: 2060, 32: 2094, 64: 2090}
    by_depth = [DepthRate(d, Rate(r), 1.0) for d, r in rates.items()]
    assert depth_knee(by_depth) == 16  # 2060 is within 2% of 2094
    assert depth_knee([]) is None


def test_shipped_ladders_have_exact_bytes(tmp_path):
    spec = parse(GRAPHS / "link-ladder.yaml")
    sizes = [author(spec, v, False).input_shape for v in spec.variants]
    assert [4 * h * w for _, _, h, w in sizes] == [1_048_576, 3_686_400, 8_294_400, 33_177_600]
    depth = parse(GRAPHS / "depth-ladder.yaml")
    assert depth.measure.depth == (1, 2, 4, 8, 16, 32, 64)
    _, c, h, w = author(depth, depth.variants[0], False).input_shape
    assert c * h * w == 16_384


def _net(name: str, bytes_in: int, fps: float, layers: tuple[str, ...]) -> RunRecord:
    r = rung(name, bytes_in, fps)
    return dataclasses.replace(r, verdict="n/a", layers=tuple(LayerPrint(n) for n in layers))


def test_a_frame_ladder_is_one_network_at_several_sizes_not_networks_side_by_side():
    ladder = [_net(f"{n}sq", n * n * 3, 1e6 / n, ("conv",)) for n in (128, 256, 512)]
    zoo = [_net("resnet", 12_288, 630.0, ("conv1", "fc")), _net("vit", 3_072, 7700.0, ("patch", "head"))]
    assert frame_ladder(ladder + zoo) == ladder
    assert frame_ladder(zoo) == []  # their rates are compute: a line through them is no link
    assert network_of(ladder[0]) == network_of(ladder[2]) != network_of(zoo[0])


def test_a_ladders_reference_is_a_rung_and_two_links_are_two_ladders():
    ref = dataclasses.replace(_net("512sq", 512 * 512 * 3, 1e6 / 512, ("conv",)), verdict="reference")
    rungs = [_net(f"{n}sq", n * n * 3, 1e6 / n, ("conv",)) for n in (128, 256)]
    assert frame_ladder([ref, *rungs]) == [ref, *rungs]  # a plain variant at the base's size
    other_link = [dataclasses.replace(r, device="link-sim:40MB/s") for r in rungs[:1]]
    assert frame_ladder([*rungs[:1], *other_link]) == []  # one size on each link: no ladder on either
