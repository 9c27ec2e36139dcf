module spindle.io/e2e/controlplane/pause

go 1.26.0
