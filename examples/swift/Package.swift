// swift-tools-version:5.7
// A Swift host for libstrata: a system-library target (CStrata) whose module map wraps
// include/strata.h, and a command-line program that loads a checkpoint and prefills a prompt.
import PackageDescription

let package = Package(
    name: "StrataPrefill",
    targets: [
        .systemLibrary(name: "CStrata", path: "Sources/CStrata"),
        .executableTarget(
            name: "strata-prefill",
            dependencies: ["CStrata"],
            linkerSettings: [.unsafeFlags(["-L../.."]), .linkedLibrary("strata")]
        ),
    ]
)
