// ModelState: copying a model's listed members out, assigning them back, and checkpoints.
#include "models/model_state.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "models/model.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {

namespace {

bool isFieldName(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The value a member holds, copied.
StateValue copyOf(const StateFields::Member& member) {
  return std::visit([](const auto* m) { return StateValue(*m); }, member);
}

// Assigns `value` to `member`; false when their types differ.
bool assign(const StateValue& value, const StateFields::Member& member) {
  return std::visit(
      [&](auto* m) {
        using T = std::remove_pointer_t<decltype(m)>;
        const T* v = std::get_if<T>(&value);
        if (v == nullptr) return false;
        *m = *v;
        return true;
      },
      member);
}

// Length of an array value; -1 for a counter.
int64_t lengthOf(const StateValue& value) {
  return std::visit(
      [](const auto& v) -> int64_t {
        if constexpr (requires { v.size(); }) {
          return static_cast<int64_t>(v.size());
        } else {
          return -1;
        }
      },
      value);
}

const char* typeName(size_t index) {
  static constexpr const char* kNames[] = {"float64 array", "int32 array", "int64 array",
                                           "uint8 array",   "crack discs", "int32",
                                           "int64",         "uint64"};
  static_assert(std::size(kNames) == std::variant_size_v<StateValue>);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

const char* shapeName(StateShape shape) {
  switch (shape) {
    case StateShape::kFree: return "any length";
    case StateShape::kPerNode: return "one per node";
    case StateShape::kPerElement: return "one per element";
    case StateShape::kPerNodeOrEmpty: return "one per node or none";
  }
  return "unknown";
}

template <size_t I = 0>
StateValue readValue(ByteReader& in, size_t type, const std::string& what) {
  if constexpr (I < std::variant_size_v<StateValue>) {
    if (type != I) return readValue<I + 1>(in, type, what);
    using T = std::variant_alternative_t<I, StateValue>;
    if constexpr (std::is_same_v<T, std::vector<CrackDisc>>) {
      return readCrackDiscs(in, what, 10'000'000);
    } else if constexpr (requires(T t) { t.data(); }) {
      return in.array<typename T::value_type>(what.c_str());
    } else {
      return in.value<T>(what.c_str());
    }
  } else {
    in.fail(what + ": unknown type " + std::to_string(type));
  }
}

}  // namespace

void StateFields::add(std::string name, Member member, StateShape shape, uint8_t components) {
  if (!isFieldName(name) || components == 0 ||
      std::any_of(entries_.begin(), entries_.end(),
                  [&](const Entry& e) { return e.name == name; })) {
    throw std::logic_error("state field '" + name + "': a bad or repeated name, or no components");
  }
  entries_.push_back({std::move(name), member, shape, components});
}

ModelState::ModelState(std::string model, int32_t nodeCount, const StateFields& fields)
    : model_(std::move(model)), nodeCount_(nodeCount) {
  auto values = std::make_shared<std::vector<Field>>();
  values->reserve(fields.entries().size());
  for (const StateFields::Entry& entry : fields.entries()) {
    values->push_back({entry.name, copyOf(entry.member), entry.shape, entry.components});
  }
  fields_ = std::move(values);
}

std::span<const ModelState::Field> ModelState::fields() const {
  if (!fields_) return {};
  return *fields_;
}

const ModelState::Field* ModelState::find(const std::string& name) const {
  for (const Field& field : fields()) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

void ModelState::write(ByteWriter& out) const {
  out.string(model_);
  out.value(nodeCount_);
  out.value<uint64_t>(fields().size());
  for (const Field& field : fields()) {
    out.string(field.name);
    out.value(static_cast<uint8_t>(field.shape));
    out.value(field.components);
    out.value(static_cast<uint8_t>(field.value.index()));
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::vector<CrackDisc>>) {
            writeCrackDiscs(out, v);
          } else if constexpr (requires { v.data(); }) {
            out.array(v);
          } else {
            out.value(v);
          }
        },
        field.value);
  }
}

ModelState ModelState::read(ByteReader& in) {
  ModelState state;
  state.model_ = in.string("model state: model name");
  if (!isFieldName(state.model_)) in.fail("model state: a bad model name");
  state.nodeCount_ = in.value<int32_t>("model state: node count");
  if (state.nodeCount_ < 1) {
    in.fail("model state: " + std::to_string(state.nodeCount_) + " nodes");
  }
  const auto count = in.value<uint64_t>("model state: field count");
  if (count == 0 || count > 256) in.fail("model state: " + std::to_string(count) + " fields");
  auto fields = std::make_shared<std::vector<Field>>();
  for (uint64_t f = 0; f < count; ++f) {
    Field& field = fields->emplace_back();
    field.name = in.string("model state: field name");
    if (!isFieldName(field.name)) in.fail("model state: a bad field name");
    const std::string what = "model state field '" + field.name + "'";
    const auto shape = in.value<uint8_t>(what.c_str());
    if (shape > static_cast<uint8_t>(StateShape::kPerNodeOrEmpty)) {
      in.fail(what + ": unknown shape " + std::to_string(shape));
    }
    field.shape = static_cast<StateShape>(shape);
    field.components = in.value<uint8_t>(what.c_str());
    if (field.components == 0) in.fail(what + ": no components");
    field.value = readValue(in, in.value<uint8_t>(what.c_str()), what);
  }
  state.fields_ = std::move(fields);
  return state;
}

// ---------------------------------------------------------------------------------------
// Model's side: the non-virtual state() and setState() over the virtual field list.

StateFields Model::stateFields() const {
  StateFields fields;
  // The listed pointers are only read here (state()); setState, which writes through them,
  // asks a non-const model.
  const_cast<Model*>(this)->listStateFields(fields);
  return fields;
}

bool Model::hasState() const {
  return !stateFields().entries().empty();
}

ModelState Model::state() const {
  const StateFields fields = stateFields();
  if (fields.entries().empty()) return {};
  return {name(), nodeCount(), fields};
}

void Model::assignStateFields(const ModelState& state) {
  StateFields fields;
  listStateFields(fields);
  for (const StateFields::Entry& entry : fields.entries()) {
    const ModelState::Field* field = state.find(entry.name);
    if (field == nullptr || !assign(field->value, entry.member)) {
      throw std::logic_error("assignStateFields: the state does not have the model's fields");
    }
  }
}

void Model::setState(const ModelState& state) {
  StateFields fields;
  listStateFields(fields);
  const std::string who = "model " + name() + ": ";
  if (fields.entries().empty() || state.empty()) {
    if (fields.entries().empty() && state.empty()) return;
    throw InputError(who + (state.empty() ? "the state is empty, the model has evolving state"
                                          : "the model has no evolving state to put back"));
  }
  if (state.model() != name()) {
    throw InputError(who + "the state is one of model " + state.model());
  }
  // Every listed field, of its type and shape, and nothing else.
  if (state.fields().size() != fields.entries().size()) {
    throw InputError(who + "the state has " + std::to_string(state.fields().size()) +
                     " fields, the model " + std::to_string(fields.entries().size()));
  }
  for (const StateFields::Entry& entry : fields.entries()) {
    const ModelState::Field* field = state.find(entry.name);
    if (field == nullptr) throw InputError(who + "the state has no field '" + entry.name + "'");
    if (field->value.index() != entry.member.index() || field->shape != entry.shape ||
        field->components != entry.components) {
      const auto each = [](uint8_t components) {
        return components == 1 ? std::string() : ", " + std::to_string(components) + " values each";
      };
      throw InputError(
          who + "the state's field '" + entry.name + "' is " + typeName(field->value.index()) +
          ", " + shapeName(field->shape) + each(field->components) + "; the model's is " +
          typeName(entry.member.index()) + ", " + shapeName(entry.shape) + each(entry.components));
    }
  }
  // Put the values back, let the model rebuild what follows from them, then check the
  // arrays' lengths against the counts it has in that state; on any error the model goes
  // back to the state it had.
  const ModelState before = this->state();
  try {
    for (const StateFields::Entry& entry : fields.entries()) {
      assign(state.find(entry.name)->value, entry.member);
    }
    stateAssigned();
    if (nodeCount() != state.nodeCount()) {
      throw InputError(who + "the state has " + std::to_string(state.nodeCount()) +
                       " nodes, the model in it " + std::to_string(nodeCount()));
    }
    for (const StateFields::Entry& entry : fields.entries()) {
      const int64_t length = lengthOf(state.find(entry.name)->value);
      const int64_t nodes = entry.components * static_cast<int64_t>(nodeCount());
      const int64_t elements = entry.components * elementCount();
      const bool fits = [&] {
        switch (entry.shape) {
          case StateShape::kPerNode: return length == nodes;
          case StateShape::kPerElement: return length == elements;
          case StateShape::kPerNodeOrEmpty: return length == nodes || length == 0;
          case StateShape::kFree: return true;
        }
        return false;
      }();
      if (!fits) {
        throw InputError(who + "the state's field '" + entry.name + "' has " +
                         std::to_string(length) + " values, the model in that state " +
                         std::to_string(nodeCount()) + " nodes and " +
                         std::to_string(elementCount()) + " elements (" +
                         std::to_string(entry.components) + " values each)");
      }
    }
  } catch (...) {
    for (const StateFields::Entry& entry : fields.entries()) {
      assign(before.find(entry.name)->value, entry.member);
    }
    stateAssigned();
    throw;
  }
}

}  // namespace shellsim
