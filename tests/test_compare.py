from loop.compare import FASTER, NOISE, SLOWER, compare
from loop.measure import spread


def run(i: int, rates: list[float]) -> dict:
    med = sorted(rates)[len(rates) // 2]
    return {"id": i, "variant": f"v{i}", "status": "ok",
            "measure": {"rate_fps": {"median": med, "min": min(rates), "max": max(rates)}, "spread_pct": spread(rates)}}


# The seed's repeats of efficientnet_lite0 (spread 2%).
BASELINE = run(1, [1177.4, 1174.0, 1153.9])


def test_seed_power_mode_difference_is_noise():
    ultra = run(2, [r * 145.8 / 146.2 for r in (1177.4, 1174.0, 1153.9)])  # 145.8 ms -> 146.2 ms
    assert compare(BASELINE, ultra)["verdict"] == NOISE
    dma = run(3, [r * 145.8 / 144.1 for r in (1177.4, 1174.0, 1153.9)])
    assert compare(BASELINE, dma)["verdict"] == NOISE


def test_pipelining_is_faster_and_its_reverse_slower():
    sync, pipelined = run(1, [720.0, 724.0, 728.0]), run(2, [2080.0, 2094.0, 2100.0])
    out = compare(sync, pipelined)
    assert out["verdict"] == FASTER and round(out["diff_pct"]) == 189
    assert compare(pipelined, sync)["verdict"] == SLOWER


def test_apart_but_within_spread_is_noise():
    a, b = run(1, [100.0, 101.0, 110.0]), run(2, [110.5, 110.8, 111.0])
    out = compare(a, b)
    assert not out["ranges_overlap"] and out["verdict"] == NOISE
