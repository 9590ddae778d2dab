"""The command lines, thin over `offload_tool.ops`: `offload-bundler` (`bundler`),
`offload-packager` (`packager`), `offload-tool` (`tool`) and its `embed` (`embed`), sharing one
argument parser and one error contract (`command_line`)."""
