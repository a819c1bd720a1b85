module ringlm

go 1.26

require golang.org/x/text v0.41.0 // indirect
