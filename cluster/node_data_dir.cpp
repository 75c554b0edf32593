// NodeImpl and its data directory (NodeOptions::dataDir, cluster/data_dir.h): opening it at
// start and restoring the Raft state of the member it names, claiming it for the member id this
// process is admitted under, and the end of a restored identity (becomeMember).
#include "cluster/node_impl.h"

#include <algorithm>
#include <future>
#include <memory>
#include <string>
#include <utility>

namespace ingrid {

Result<MemberId> NodeImpl::openDataDir() {
  if (options_.dataDir.empty()) return MemberId{0};
  Result<std::unique_ptr<DataDir>> opened = DataDir::open(options_.dataDir);
  if (!opened) return std::move(opened).error();
  dataDir_ = std::move(opened).value();
  Result<std::optional<DataDir::Identity>> identity = dataDir_->identity();
  if (!identity) return std::move(identity).error();
  Result<bool> holds = RaftIo::holdsState(dataDir_->raftDir());
  if (!holds) return std::move(holds).error();
  if (!identity->has_value() || !*holds) {
    // Nothing to restore (a first start, or state a crash left half made): start afresh.
    if (Result<bool> forgot = dataDir_->forget(); !forgot) return std::move(forgot).error();
    return MemberId{0};
  }
  const DataDir::Identity& was = **identity;
  if (was.address != selfAddress_) {
    return Error(Errc::invalid_configuration,
                 "data directory " + dataDir_->path() + " holds the Raft state of member " +
                     std::to_string(was.memberId) + " at " + was.address +
                     ", but this node advertises " + selfAddress_ +
                     ": the other members reach that Raft server at its old address. Restart it "
                     "at " +
                     was.address + ", or give it an empty directory");
  }
  // Votes as that member (its term, vote and log as it left them) from now on, so that a quorum
  // it belongs to can elect a leader; joins again as a new member meanwhile (start()).
  restored_.store(was.memberId);
  selfId_.store(was.memberId, std::memory_order_release);
  std::promise<Result<bool>> made;
  asio::post(netIo_, [this, &made, id = was.memberId] {
    made.set_value(startControl(id, /*bootstrap=*/false));
  });
  auto answer = made.get_future();
  waitFor(answer);
  if (Result<bool> started = answer.get(); !started) return std::move(started).error();
  // Its timers run from now (start() starts them again once joined, which restarts each): elected
  // leader meanwhile, it judges the members' silence like any leader.
  asio::post(netIo_, [this] { startHeartbeats(); });
  log_.info({.member = was.memberId}, selfAddress_, " restored member ", was.memberId,
            "'s Raft state from ", dataDir_->path(), ": it votes as member ", was.memberId,
            " until the cluster has removed that member, then joins as a new ",
            "one (its buckets, in memory, are gone)");
  return was.memberId;
}

Result<bool> NodeImpl::claimDataDir(MemberId id) {
  if (!dataDir_) return true;
  if (Result<bool> forgot = dataDir_->forget(); !forgot) return forgot;
  return dataDir_->setIdentity(DataDir::Identity{id, selfAddress_});
}

Result<bool> NodeImpl::becomeMember(MemberId id) {
  if (const MemberId was = restored_.load(); was != 0) {
    // The leader admits no one at this address before the restored Raft server's removal from
    // the configuration (Coordinator::requestJoin): its vote is no longer needed.
    dropIdentity();
    restored_.store(0);
    // The new Raft server replays the log from its start: what the old one committed (or a
    // catch-up fetched) is not this member's view yet.
    committed_ = topology();
    log_.info({.member = id}, selfAddress_, " no longer votes as member ", was,
              "; admitted as member ", id);
  }
  if (Result<bool> claimed = claimDataDir(id); !claimed) return claimed;
  selfId_.store(id, std::memory_order_release);
  return startControl(id, /*bootstrap=*/false);
}

bool NodeImpl::restoredAlone() const {
  std::lock_guard lock(committedMu_);
  return !committedAddresses_.empty() &&
         std::all_of(committedAddresses_.begin(), committedAddresses_.end(),
                     [this](const std::string& a) { return a == selfAddress_; });
}

Result<bool> NodeImpl::startAfresh() {
  std::promise<void> dropped;
  asio::post(netIo_, [this, &dropped] {
    forgetIdentity();
    dropped.set_value();
  });
  auto answer = dropped.get_future();
  waitFor(answer);
  return bootstrap();  // claims the directory for member 1 of the new cluster
}

void NodeImpl::forgetIdentity() {
  dropIdentity();
  restored_.store(0);
  selfId_.store(0, std::memory_order_release);
  committed_ = topology();
}

void NodeImpl::dropIdentity() {
  if (control_) control_->stop();
  control_.reset();
  coordinator_.reset();
  for (auto& [id, peer] : peers_) peer->close();
  peers_.clear();
  for (auto& [id, peer] : departed_) peer->close();
  departed_.clear();
  if (shardLinks_) shardLinks_->closeAll();
  closeReplicaLinks();  // they said Hello as the old member
  detector_.clear();
  lease_.clear();
}

std::optional<MemberId> NodeImpl::CoordinatorRole::raftServerAt(const std::string& address) const {
  if (!node_.control_) return std::nullopt;
  for (const auto& [id, at] : node_.control_->status().servers) {
    if (at == address) return id;
  }
  return std::nullopt;
}

}  // namespace ingrid
