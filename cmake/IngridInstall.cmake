# Install + export: a consumer does find_package(ingrid) and links ingrid::ingrid (or a module,
# ingrid::grid / ingrid::processors / ingrid::limiters / ingrid::cluster). Public headers install to include/ingrid/.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(INGRID_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ingrid)

install(TARGETS ingrid-node ingrid-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ingrid_grid ingrid_processors ingrid_limiters ingrid_wire ingrid_control ingrid_shard ingrid_cluster ingrid_client ingrid ingrid_asio ingrid_raft
        EXPORT ingridTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Only the public headers (include/ingrid/); internal ones stay in the source tree.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ingrid DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

install(EXPORT ingridTargets NAMESPACE ingrid:: DESTINATION ${INGRID_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ingridConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/ingridConfig.cmake
                              INSTALL_DESTINATION ${INGRID_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ingridConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ingridConfig.cmake ${PROJECT_BINARY_DIR}/ingridConfigVersion.cmake
        DESTINATION ${INGRID_CMAKE_DIR})
