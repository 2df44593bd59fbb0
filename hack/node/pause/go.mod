module kubeplace/hack/node/pause

go 1.22
