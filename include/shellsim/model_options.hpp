// A body's model options: one value per model, each of the model's own definition type
// (FiberDef, DiscreteShellDef, ...; every such type names its model in a
// `static constexpr std::string_view kModel`). A body definition holds them without
// knowing the models, so a new model adds its own type and nothing here.
//
// Values are made with their defaults at first use; two option sets are equal when every
// model's options are, an absent value counting as its defaults. Copies are deep.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace shellsim {

class ModelOptions {
 public:
  ModelOptions() = default;
  ModelOptions(const ModelOptions& other) { *this = other; }
  ModelOptions& operator=(const ModelOptions& other) {
    if (this == &other) return *this;
    values_.clear();
    for (const auto& [model, value] : other.values_) values_.emplace(model, value->clone());
    return *this;
  }
  ModelOptions(ModelOptions&&) noexcept = default;
  ModelOptions& operator=(ModelOptions&&) noexcept = default;
  ~ModelOptions() = default;

  // The options of T::kModel, made with T's defaults if there are none yet.
  template <class T>
  T& get() {
    auto found = values_.find(T::kModel);
    if (found == values_.end()) {
      found = values_.emplace(std::string(T::kModel), std::make_unique<Value<T>>()).first;
    }
    return checked<T>(*found->second).value;
  }
  // The options of T::kModel, or T's defaults when none were set.
  template <class T>
  [[nodiscard]] const T& get() const {
    static const T defaults{};
    const auto found = values_.find(T::kModel);
    return found == values_.end() ? defaults : checked<T>(*found->second).value;
  }
  // Whether options of `model` were set (made by get or read from a scene).
  [[nodiscard]] bool has(std::string_view model) const { return values_.contains(model); }

  bool operator==(const ModelOptions& other) const {
    for (const auto& [model, value] : values_) {
      const auto found = other.values_.find(model);
      if (found == other.values_.end() ? !value->isDefault() : !value->equals(*found->second)) {
        return false;
      }
    }
    for (const auto& [model, value] : other.values_) {
      if (!values_.contains(model) && !value->isDefault()) return false;
    }
    return true;
  }

 private:
  struct Entry {
    virtual ~Entry() = default;
    [[nodiscard]] virtual std::unique_ptr<Entry> clone() const = 0;
    [[nodiscard]] virtual bool equals(const Entry& other) const = 0;
    [[nodiscard]] virtual bool isDefault() const = 0;
  };
  template <class T>
  struct Value final : Entry {
    T value{};
    [[nodiscard]] std::unique_ptr<Entry> clone() const override {
      auto copy = std::make_unique<Value<T>>();
      copy->value = value;
      return copy;
    }
    [[nodiscard]] bool equals(const Entry& other) const override {
      const auto* same = dynamic_cast<const Value<T>*>(&other);
      return same != nullptr && same->value == value;
    }
    [[nodiscard]] bool isDefault() const override { return value == T{}; }
  };
  template <class T>
  static Value<T>& checked(Entry& entry) {
    auto* value = dynamic_cast<Value<T>*>(&entry);
    if (value == nullptr) {
      throw std::logic_error("model options of '" + std::string(T::kModel) +
                             "' were made with another type");
    }
    return *value;
  }
  template <class T>
  static const Value<T>& checked(const Entry& entry) {
    const auto* value = dynamic_cast<const Value<T>*>(&entry);
    if (value == nullptr) {
      throw std::logic_error("model options of '" + std::string(T::kModel) +
                             "' were made with another type");
    }
    return *value;
  }

  std::map<std::string, std::unique_ptr<Entry>, std::less<>> values_;  // by model name
};

}  // namespace shellsim
