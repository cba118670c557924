import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Query, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { ApiCreatedResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { Authenticated, Public } from '../auth/auth.decorators.js';
import { LoginThrottleService } from '../auth/login-throttle.service.js';
import { ApiErrors } from '../common/api-errors.js';
import { SuccessResponseDto } from '../common/error-response.dto.js';
import { ApiIdParam, ParseIdPipe } from '../common/id.pipe.js';
import {
  CreateUserDto,
  ListUsersQueryDto,
  ResetPasswordDto,
  SetUserEnabledDto,
  SetUserRolesDto,
  UpdateUserDto,
} from './dto/user-requests.dto.js';
import { UserDetailDto, UserListDto } from './dto/user.dto.js';
import { toUserDetailResponse } from './user.mapper.js';
import { UsersService } from './users.service.js';

@ApiTags('Users')
@Controller('admin/users')
export class UsersController {
  constructor(
    private readonly users: UsersService,
    private readonly throttle: LoginThrottleService,
  ) {}

  /** Creates the first user, an admin. Public while no user exists; 409 afterwards. */
  @Public()
  @Post('create_super_user')
  @ApiCreatedResponse({ type: UserDetailDto })
  @ApiErrors(400, 409, 429)
  async createSuperUser(@Body() dto: CreateUserDto, @Req() request: FastifyRequest): Promise<UserDetailDto> {
    // Public: counted per client address before anything else is done.
    await this.throttle.reserveBootstrap(request.ip);
    return toUserDetailResponse(await this.users.createSuperUser(dto));
  }

  /** Lists users, filtered, sorted and paged. */
  @Authenticated({ admin: true })
  @Get()
  @ApiOkResponse({ type: UserListDto })
  @ApiErrors(400)
  listUsers(@Query() query: ListUsersQueryDto): Promise<UserListDto> {
    return this.users.listUsers(query);
  }

  /** Creates a password user with role viewer. */
  @Authenticated({ admin: true })
  @Post()
  @ApiCreatedResponse({ type: UserDetailDto })
  @ApiErrors(400, 409)
  async createUser(@Body() dto: CreateUserDto): Promise<UserDetailDto> {
    return toUserDetailResponse(await this.users.createUser(dto));
  }

  /** One user, as the list shows it plus `avatar_url`. */
  @Authenticated({ admin: true })
  @Get(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: UserDetailDto })
  @ApiErrors(400, 404)
  async getUser(@Param('id', ParseIdPipe) id: number): Promise<UserDetailDto> {
    return toUserDetailResponse(await this.users.getUser(id));
  }

  /** Changes a user's display name and avatar; only the properties sent change. */
  @Authenticated({ admin: true })
  @Put(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: UserDetailDto })
  @ApiErrors(400, 404)
  async updateUser(@Param('id', ParseIdPipe) id: number, @Body() dto: UpdateUserDto): Promise<UserDetailDto> {
    return toUserDetailResponse(await this.users.updateUser(id, dto));
  }

  /** Deletes a user and ends their sessions. The last enabled admin cannot be deleted. */
  @Authenticated({ admin: true })
  @Delete(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: SuccessResponseDto })
  @ApiErrors(400, 404, 409)
  async deleteUser(@Param('id', ParseIdPipe) id: number): Promise<SuccessResponseDto> {
    await this.users.deleteUser(id);
    return { success: true };
  }

  /**
   * Sets a new password, ends all of the user's sessions and deletes the user's API keys. Users of a
   * single sign-on provider have no password (409).
   */
  @Authenticated({ admin: true })
  @Post(':id/reset_password')
  @ApiIdParam()
  @HttpCode(200)
  @ApiOkResponse({ type: SuccessResponseDto })
  @ApiErrors(400, 404, 409)
  async resetUserPassword(
    @Param('id', ParseIdPipe) id: number,
    @Body() dto: ResetPasswordDto,
  ): Promise<SuccessResponseDto> {
    await this.users.resetPassword(id, dto.password);
    return { success: true };
  }

  /** Enables or disables a user; disabling ends their sessions. The last enabled admin cannot be disabled. */
  @Authenticated({ admin: true })
  @Post(':id/enable')
  @ApiIdParam()
  @HttpCode(200)
  @ApiOkResponse({ type: SuccessResponseDto })
  @ApiErrors(400, 404, 409)
  async setUserEnabled(
    @Param('id', ParseIdPipe) id: number,
    @Body() dto: SetUserEnabledDto,
  ): Promise<SuccessResponseDto> {
    await this.users.setEnabled(id, dto.enabled);
    return { success: true };
  }

  /** Replaces a user's roles (built-in or custom, by name; an unknown name is a 400). The last enabled admin cannot lose the admin role. */
  @Authenticated({ admin: true })
  @Put(':id/roles')
  @ApiIdParam()
  @ApiOkResponse({ type: UserDetailDto })
  @ApiErrors(400, 404, 409)
  async setUserRoles(@Param('id', ParseIdPipe) id: number, @Body() dto: SetUserRolesDto): Promise<UserDetailDto> {
    return toUserDetailResponse(await this.users.setRoles(id, dto));
  }
}
