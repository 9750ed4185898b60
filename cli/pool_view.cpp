#include "cli/pool_view.hpp"

#include <map>

#include "topology/generation.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

using provision::CellState;

const std::vector<Column> k_host_columns = {{"name", "name"},
                                            {"address", "address"},
                                            {"port", "port"},
                                            {"user", "user"},
                                            {"coords", "coords"},
                                            {"state", "state"},
                                            {"claimed_by", "claimed_by"}};

Json pool_summary_json(const provision::PoolInfo& p, int hosts) {
  const auto& l = p.layout;
  return Json{{"name", p.name},
              {"generation", std::string(l.generation->name)},
              {"chips_per_host", l.chips_per_host},
              {"shape", topology::format_dims(l.shape, l.rank())},
              {"host_grid", topology::format_dims(l.host_grid, l.rank())},
              {"capacity", l.capacity()},
              {"hosts", hosts},
              {"local", !p.local.is_null()},
              {"owner", p.owner}};
}

namespace {

// The hosts held back for repairs (pool spares), free or taken by a repair, in grid order.
std::vector<std::string> spare_names(const provision::PoolView& view) {
  std::vector<std::string> out;
  for (const auto& h : view.hosts) {
    if (h.spare) {
      out.push_back(h.name);
    }
  }
  return out;
}

} // namespace

Json host_json(const provision::HostEntry& h, const std::string& claimed_by) {
  Json labels = Json::object();
  for (const auto& [k, v] : h.labels) {
    labels[k] = v;
  }
  std::string state = !claimed_by.empty()       ? "claimed"
                      : !h.drain_reason.empty() ? "drained"
                      : h.spare                 ? "spare"
                                                : "free";
  return Json{{"name", h.name},
              {"address", h.address},
              {"port", h.port > 0 ? Json(h.port) : Json(nullptr)}, // null: ssh_config's, else 22
              {"user", h.user},
              {"identity_file", h.identity_file},
              {"proxy_jump", h.proxy_jump}, // "" when none (ssh_config's ProxyJump may apply)
              {"workdir", h.workdir},
              {"coords", provision::format_position(h.coords)},
              {"state", state},
              {"claimed_by", claimed_by},
              {"drain_reason", h.drain_reason},
              {"spare", h.spare},
              {"labels", labels}};
}

Json pool_view_json(const provision::PoolView& view) {
  Json j = pool_summary_json(view.info, static_cast<int>(view.hosts.size()));
  std::map<std::string, std::string> owner;
  for (const auto& c : view.claims) {
    owner[c.host] = c.owner;
  }
  Json hosts = Json::array();
  for (const auto& h : view.hosts) {
    hosts.push_back(host_json(h, owner.count(h.name) ? owner[h.name] : ""));
  }
  j["admins"] = view.info.admins;
  j["ssh_work"] = std::string(provision::to_string(view.info.ssh_work));
  j["quotas"] = view.info.quotas; // project -> chips; a project not named is unlimited
  j["free"] = view.grid.count(CellState::free);
  j["claimed"] = view.grid.count(CellState::claimed);
  j["drained"] = view.grid.count(CellState::drained);
  j["spares"] = spare_names(view);
  j["spare"] = view.grid.count(CellState::spare);
  Json blocks = Json::array();
  for (const auto& b : provision::largest_free_blocks(view.grid, 3)) {
    blocks.push_back(Json{{"origin", provision::format_position(b.origin)},
                          {"size", provision::format_block_size(b, view.info.layout.rank())},
                          {"hosts", b.volume()}});
  }
  j["largest_free_blocks"] = blocks;
  j["host_list"] = hosts;
  return j;
}

void draw_grid(std::ostream& os, const provision::PoolView& view) {
  const auto& g = view.info.layout.host_grid;
  std::map<std::string, char> letter;
  for (const auto& cell : view.grid.cells()) {
    if (cell.state == CellState::claimed && !letter.count(cell.owner)) {
      char next = static_cast<char>('A' + static_cast<int>(letter.size()) % 26);
      letter[cell.owner] = next;
    }
  }
  for (int z = 0; z < g[2]; ++z) {
    if (g[2] > 1) {
      os << "  z=" << z << "\n";
    }
    for (int y = 0; y < g[1]; ++y) {
      os << "    ";
      for (int x = 0; x < g[0]; ++x) {
        const auto& cell = view.grid.at(provision::Dims{x, y, z});
        char c = '-';
        switch (cell.state) {
        case CellState::empty:
          c = '-';
          break;
        case CellState::free:
          c = '.';
          break;
        case CellState::drained:
          c = 'D';
          break;
        case CellState::spare:
          c = 'S';
          break;
        case CellState::claimed:
          c = letter[cell.owner];
          break;
        }
        os << c << (x + 1 < g[0] ? " " : "");
      }
      os << "\n";
    }
  }
  os << "  legend: . free  S spare  D drained  - no host";
  for (const auto& [owner, c] : letter) {
    os << "  " << c << " " << owner;
  }
  os << "\n";
}

void print_pool_view(std::ostream& os, const provision::PoolView& view) {
  const auto& l = view.info.layout;
  os << "pool:      " << view.info.name << (view.info.local.is_null() ? "" : " (local)") << "\n"
     << "layout:    " << l.generation->name << ", " << topology::format_dims(l.shape, l.rank())
     << " chips, hosts of " << l.chips_per_host << " chips in a "
     << topology::format_dims(l.host_grid, l.rank()) << " grid\n"
     << "hosts:     " << view.hosts.size() << " of " << l.capacity() << " positions ("
     << view.grid.count(CellState::free) << " free, " << view.grid.count(CellState::claimed)
     << " claimed, " << view.grid.count(CellState::drained) << " drained, "
     << view.grid.count(CellState::spare) << " spare)\n";
  const std::vector<std::string> spares = spare_names(view);
  if (!spares.empty()) {
    os << "spares:    " << spares.size() << " held back for repairs (" << util::join(spares, ", ")
       << ")\n";
  }
  if (!view.info.owner.empty()) {
    os << "owner:     " << view.info.owner << "\n";
  }
  if (!view.info.admins.empty()) {
    os << "admins:    " << util::join(view.info.admins, ", ") << "\n";
  }
  os << "ssh work:  by " << provision::to_string(view.info.ssh_work) << "\n";
  if (!view.info.quotas.empty()) {
    std::vector<std::string> quotas;
    for (const auto& [project, chips] : view.info.quotas) {
      quotas.push_back(project + " " + std::to_string(chips));
    }
    os << "quotas:    " << util::join(quotas, ", ") << " chips (others unlimited)\n";
  }
  os << "\nhost grid (x across, y down):\n";
  draw_grid(os, view);
  auto blocks = provision::largest_free_blocks(view.grid, 3);
  os << "\nlargest free blocks: ";
  if (blocks.empty()) {
    os << "none";
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    os << (i ? ", " : "") << provision::format_block_size(blocks[i], l.rank()) << " at "
       << provision::format_position(blocks[i].origin);
  }
  os << "\n";
  if (!view.hosts.empty()) {
    os << "\n";
    Json rows = pool_view_json(view)["host_list"];
    std::vector<std::string> headers;
    for (const auto& c : k_host_columns) {
      std::string h = c.header;
      for (auto& ch : h) {
        ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      }
      headers.push_back(h);
    }
    std::vector<std::vector<std::string>> cells;
    for (const auto& r : rows) {
      std::vector<std::string> row;
      for (const auto& c : k_host_columns) {
        row.push_back(cell_text(r[c.field]));
      }
      cells.push_back(row);
    }
    os << render_table(headers, cells);
  }
}

} // namespace tpuctl::cli
