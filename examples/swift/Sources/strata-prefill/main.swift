// strata-prefill: load a checkpoint through libstrata and prefill a prompt from Swift.
//
//   swift run strata-prefill MODEL_DIR 1,2,3,4
//
// Prints the backend, the model, the prefill speed and the top-5 next tokens.
import CStrata
import Foundation

struct StrataError: Error, CustomStringConvertible {
    let status: strata_status
    let message: String
    var description: String { "\(String(cString: strata_status_name(status))): \(message)" }
}

/// Throws the calling thread's last error when status is not STRATA_OK.
func check(_ status: strata_status) throws {
    guard status == STRATA_OK else {
        let n = strata_last_error(nil, 0)
        var buf = [CChar](repeating: 0, count: n + 1)
        strata_last_error(&buf, n + 1)
        throw StrataError(status: status, message: String(cString: buf))
    }
}

func run() throws {
    let args = CommandLine.arguments
    guard args.count == 3 else {
        print("usage: strata-prefill MODEL_DIR TOKEN,TOKEN,...")
        exit(1)
    }
    let tokens = args[2].split(separator: ",").compactMap { Int32($0.trimmingCharacters(in: .whitespaces)) }
    guard !tokens.isEmpty else { throw StrataError(status: STRATA_ERR_INVALID_ARGUMENT, message: "no token ids") }
    guard strata_abi_version() == STRATA_ABI_VERSION else {
        throw StrataError(status: STRATA_ERR_INTERNAL, message: "libstrata ABI \(strata_abi_version()) != header \(STRATA_ABI_VERSION)")
    }

    var dev: OpaquePointer?
    try check(strata_device_open(nil, &dev))
    defer { strata_device_free(dev) }
    var dinfo = strata_device_props()
    dinfo.struct_size = MemoryLayout<strata_device_props>.size
    try check(strata_device_info(dev, &dinfo))

    var model: OpaquePointer?
    try check(strata_model_load(dev, args[1], nil, &model))
    defer { strata_model_free(model) }
    var minfo = strata_model_props()
    minfo.struct_size = MemoryLayout<strata_model_props>.size
    try check(strata_model_info(model, &minfo))

    var session: OpaquePointer?
    var sp = strata_session_default_params()
    sp.max_context = Int64(max(tokens.count, 4096))
    try check(strata_session_new(model, &sp, &session))
    defer { strata_session_free(session) }

    let vocab = Int(minfo.vocab)
    var logits = [Float](repeating: 0, count: vocab)
    let t0 = Date()
    try check(strata_session_prefill(session, tokens, tokens.count, nil, &logits, vocab, nil))
    let dt = Date().timeIntervalSince(t0)

    let backend = withUnsafeBytes(of: dinfo.backend) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
    let arch = withUnsafeBytes(of: minfo.arch) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
    print("library   \(String(cString: strata_version_string()))")
    print("backend   \(backend)")
    print("model     \(arch), \(minfo.layers) layers, vocab \(vocab)")
    print(String(format: "prefill   %d tokens in %.1f ms: %.1f tokens/s", tokens.count, dt * 1e3, Double(tokens.count) / dt))
    let top = logits.indices.sorted { logits[$0] > logits[$1] }.prefix(5)
    print("top-5     " + top.map { String(format: "%d (%.4f)", $0, logits[$0]) }.joined(separator: "  "))
}

do {
    try run()
} catch {
    FileHandle.standardError.write("strata-prefill: \(error)\n".data(using: .utf8)!)
    exit(2)
}
