package tracer

func archDetail() string { return "x86_64" }
