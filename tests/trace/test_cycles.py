from harness.trace.cycles import cycle_salt, cycled_id, split_cycled_id


def test_cycled_ids_map_back_to_the_trace_session():
    for sid in ("s1", "s000012.sub3", "a@c", "x@c0"):
        assert split_cycled_id(cycled_id(sid, 0)) == (sid, 0)
        assert split_cycled_id(cycled_id(sid, 7)) == (sid, 7)
    assert cycled_id("s1", 0) == "s1"


def test_every_cycle_has_its_own_salt():
    salts = {cycle_salt("run", c) for c in range(4)} | {cycle_salt(None, c) for c in range(1, 4)}
    assert len(salts) == 7 and cycle_salt("run", 0) == "run" and cycle_salt(None, 0) is None
