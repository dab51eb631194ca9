"""The load driver: replays a trace's sessions against a Target and records every request.

Public API (see docs/driver.md):

    config.ReplayConfig                     when and what to send (frozen, validated); its
                                            Load is the scenario's `load:`
    replay_into.run_replay(trace, target, config, run_dir, *, trace_path=None,
                   show_progress=False, manifest_extra=None) -> ReplayResult   async; records + manifest
    replay_into.replay_into(folder, trace, target, config)     the same into an open RunFolder
    replay_into.run_blocking(coro)          from synchronous code, on uvloop if installed
    runfolder.RunFolder(path, run_id, **manifest_fields)       the one writer of a run folder
    replay.Replay(trace, target, config, recorder).run()       the engine alone, any record sink
    target.Target, Sink, RequestSpec, Sent, Usage, Done, Failure   the Target protocol
    target.Timeouts                         an HTTP target's timeouts (the scenario's too)
    http.HTTPTarget(http.HTTPTargetConfig(...))   any server speaking an API of http.APIS
    engine_target.EngineTarget(EngineConfig(...))             the reference engine, in-process
    recorder.Recorder, collect, RecordSink   records.jsonl; one record per request
    manifest.new_manifest, replay_fields    manifest.json's content

Kept import-light: `harness --help` imports this package.
"""
