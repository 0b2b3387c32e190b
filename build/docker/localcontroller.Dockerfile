# The image of Nereid's localcontroller: a static Go binary on distroless, as user nonroot.
# `make images` builds it under the name the chart's values.yaml gives it:
#   docker build -f build/docker/localcontroller.Dockerfile -t <image> .
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, so that a code change reuses the downloaded modules' layer.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
# What --version prints; hack/images.sh passes git describe of the checkout (the
# build context has no .git for Go to stamp).
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/nereid-ml/nereid/pkg/version.version=${VERSION} -X github.com/nereid-ml/nereid/pkg/version.commit=${COMMIT}" \
      -o /out/localcontroller ./cmd/localcontroller

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/localcontroller /localcontroller
# distroless's nonroot user, by number: the kubelet can only check runAsNonRoot
# against a numeric user.
USER 65532:65532
ENTRYPOINT ["/localcontroller"]
