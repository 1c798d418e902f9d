// The definitions the package must have given the consumer's translation
// unit (EXPECT_SEPARATE_COMPILATION, EXPECT_FRAME_CACHE: how the installed
// copy was built), checked before any Asio header can define them itself.
#pragma once

#if defined(EXPECT_SEPARATE_COMPILATION)
#if EXPECT_SEPARATE_COMPILATION != defined(BOOST_ASIO_SEPARATE_COMPILATION)
#error "BOOST_ASIO_SEPARATE_COMPILATION does not match how the installed library was built"
#endif
#endif
#if defined(EXPECT_FRAME_CACHE)
#if EXPECT_FRAME_CACHE == 0 && defined(BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE)
#error "the package imposes a recycling-allocator cache size it was built without"
#elif EXPECT_FRAME_CACHE != 0 && BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE != EXPECT_FRAME_CACHE
#error "BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE does not match how the installed library was built"
#endif
#endif
