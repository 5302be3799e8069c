// Module weights on disk: a module's state dict as a safetensors file, with
// PyTorch's names, shapes and dtypes (F32/F64 parameters, I64
// num_batches_tracked), so files move between frost and PyTorch unchanged.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "../nn/module.hpp"
#include "safetensors.hpp"

namespace frost {

namespace detail::safetensors {
template <class T>
std::vector<OutEntry> state_entries(const nn::StateDict<T>& sd) {
  std::vector<OutEntry> entries;
  for (const auto& kv : sd) {  // not a structured binding: clang 14 cannot capture those in the lambda
    const std::string& name = kv.first;
    std::visit([&](const auto& t) { entries.push_back(out_entry(name, t)); }, kv.second);
  }
  return entries;
}
}  // namespace detail::safetensors

/// Writes a state dict; `format: pt` in the metadata as PyTorch's
/// safetensors.torch.save_file consumers expect.
template <class T>
void save_safetensors(const nn::StateDict<T>& sd, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {{"format", "pt"}}) {
  detail::safetensors::write_file(detail::safetensors::serialize(detail::safetensors::state_entries(sd), metadata), path);
}

/// Writes `module.state_dict()` to `path`: `save_safetensors(*model, "model.safetensors")`.
template <class T>
void save_safetensors(const nn::ModuleT<T>& module, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {{"format", "pt"}}) {
  save_safetensors(module.state_dict(), path, metadata);
}

/// A state dict holding every tensor of `file`: floating dtypes as Tensor<T>,
/// integer ones as int64.
template <class T>
nn::StateDict<T> state_dict_from(const SafetensorsFile& file) {
  nn::StateDict<T> sd;
  for (const auto& name : file.names()) {
    const std::string& dt = file.info(name).dtype;
    const bool floating = dt == "F16" || dt == "BF16" || dt == "F32" || dt == "F64";
    if (floating) sd.insert(name, file.template get<T>(name));
    else sd.insert(name, file.template get<std::int64_t>(name));
  }
  return sd;
}

/// Loads the file at `path` into `module` (see ModuleT::load_state_dict for
/// `strict` and the errors). Tensors are converted to the module's types
/// (a float16 checkpoint loads into a float model).
template <class T>
void load_safetensors(nn::ModuleT<T>& module, const std::string& path, bool strict = true) {
  module.load_state_dict(state_dict_from<T>(SafetensorsFile::open(path)), strict);
}

}  // namespace frost
