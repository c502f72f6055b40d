"""The command framework: `define_pipeline_command` turns a pipeline into a program.

A command infers flags from the options schema (`_schema_flags`, `_flags`), parses and
validates them (`_parser`), adds the run controls (`_options`) and runs the pipeline
with progress and exit codes (`_command`). The `tubeless` program (`tubeless.cli._program`)
runs a command for `tubeless run`.
"""
