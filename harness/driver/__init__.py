"""The load driver: replays a trace's sessions against a Target and records every request.

Public API (see docs/driver.md):

    config.ReplayConfig                     when and what to send (frozen, validated)
    run.run_replay(trace, target, config, run_dir, *, trace_path=None, show_progress=False,
                   manifest_extra=None) -> ReplayResult        async; records + manifest
    run.replay_blocking(...)                the same from synchronous code (uvloop if installed)
    replay.Replay(trace, target, config, recorder).run()       the engine alone, any record sink
    target.Target, RequestSpec, Chunk, Usage, Done, Failure, Timeouts   the Target protocol
    openai_http.OpenAIHTTPTarget(HTTPTargetConfig(...))        any OpenAI-compatible server
    engine_target.EngineTarget(EngineConfig(...))             the reference engine, in-process
    recorder.Recorder, collect, new_record  records.jsonl; events -> one record per request
    manifest.new_manifest, finish_manifest, write_manifest     manifest.json
    flags.add_*_flags, build_config, build_target              the CLI flags, reusable

Kept import-light: `harness --help` imports this package.
"""
